"""Workspaces of several processes editing one file (audit workspace-proxy #0): every edit a process was told is done is in
the file at the end; the others were refused as conflicts. Real processes, each with a workspace of its own, as two
`headlesnb mcp --workspace alice|bob` servers have, over one root or over a folder and a subfolder of it (audit fixes2 F1:
`headlesnb mcp --root` defaults to the current folder); stopped by PID."""
import json, subprocess, sys, textwrap

import pytest

pytestmark = pytest.mark.timeout(300)

WRITER = textwrap.dedent("""
    import json, os, sys, time
    from headlesnb.errors import ConflictError
    from headlesnb.workspace import WorkspaceManager
    root, rel, name, n, writers, sync = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
    ws = WorkspaceManager(root, code_map=False).open_workspace(name)
    e = ws.open_editor(rel)['id']
    open(os.path.join(sync, f'ready.{name}'), 'w').close()
    while sum(f.startswith('ready.') for f in os.listdir(sync)) < writers: time.sleep(0.001)  # all writers start together
    acked, refused = [], 0
    for i in range(n):
        try: ws.insert(e, 1, f'{name}{i}'); acked.append(f'{name}{i}')
        except ConflictError: refused += 1; ws.reload_editor(e)  # as a model would: take theirs, go on
    print(json.dumps(dict(acked=acked, refused=refused)))
    """)


def race(tmp_path, writers:dict, n:int, file):
    "Run `writers` ({name: (root, path of the file under it)}) `n` inserts each at once; assert no acknowledged insert is lost"
    sync = tmp_path / 'sync'; sync.mkdir()
    ps = [subprocess.Popen([sys.executable, '-c', WRITER, str(root), rel, w, str(n), str(len(writers)), str(sync)], stdout=subprocess.PIPE, text=True)
          for w, (root, rel) in writers.items()]
    outs = [json.loads(p.communicate(timeout=240)[0]) for p in ps]
    assert all(p.returncode == 0 for p in ps)
    lines = set(file.read_text().splitlines())
    acked = [l for o in outs for l in o['acked']]
    lost = [l for l in acked if l not in lines]
    assert not lost, f'{len(lost)} of {len(acked)} acknowledged edits lost: {lost}'
    assert sum(o['refused'] for o in outs) > 0, 'the writers never met: the race was not run'
    assert len(acked) + sum(o['refused'] for o in outs) == n * len(writers)


def test_concurrent_editors_lose_no_acknowledged_edit(tmp_path):
    "Writers racing on one file through editors: each acknowledged insert is in the file, each other one refused as a conflict"
    (tmp_path / 'x.txt').write_text('end\n')
    race(tmp_path, {w: (tmp_path, 'x.txt') for w in ('alice', 'bob', 'carol')}, 80, tmp_path / 'x.txt')


def test_editors_of_one_file_from_two_roots_lose_no_acknowledged_edit(tmp_path):
    "Writers rooted at D and at D/sub (two servers started in a repository and in one of its folders) share one file's lock"
    d = tmp_path / 'D'; (d / 'sub').mkdir(parents=True)
    (d / 'sub' / 'x.txt').write_text('end\n')
    race(tmp_path, dict(alice=(d, 'sub/x.txt'), bob=(d / 'sub', 'x.txt'), carol=(d / 'sub', 'x.txt')), 60, d / 'sub' / 'x.txt')
