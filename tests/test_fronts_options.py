"""The kernel options `headlesnb mcp` and `headlesnb serve` share (`fronts.options`), as real processes: a kernel that is not
installed or a Jupyter URL that can never answer is refused before the server starts (argparse's one line, exit 2), and the
names that work still start it. Every process is stopped by its PID (or ends at its stdin's end)."""
import os, subprocess, sys

import pytest

pytestmark = pytest.mark.timeout(300)


def headlesnb(*args, env=None) -> subprocess.CompletedProcess:
    "`headlesnb ARGS` with stdin at its end (a stdio MCP server that started stops there, exit 0)"
    return subprocess.run([sys.executable, '-m', 'headlesnb.fronts.cli', *args], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=120, env={**os.environ, **(env or {})})


def refused(r, said):
    "Refused as argparse refuses an option: exit 2, the reason on stderr's last line, nothing served"
    assert r.returncode == 2 and r.stdout == '' and 'serving' not in r.stderr, (r.returncode, r.stdout, r.stderr)
    assert said in r.stderr.splitlines()[-1], r.stderr


@pytest.mark.parametrize('front', ['mcp', 'serve'])
def test_kernel_not_installed_is_refused_at_start(tmp_path, front):
    "`--kernel nosuch` is one line and exit 2, naming the installed kernels, before a port is bound or a tool is offered"
    r = headlesnb(front, '--root', str(tmp_path), '--port', '0', '--kernel', 'nosuch')
    refused(r, "argument --kernel: the kernel 'nosuch' is not installed")
    assert 'python3' in r.stderr  # what is installed


@pytest.mark.parametrize('url', ['ftp://x', 'http://', 'localhost:8888'])
def test_jupyter_url_that_cannot_work_is_refused_at_start(tmp_path, url):
    "A URL no Jupyter server can have, given or from $JUPYTER_URL, is refused at start, not at every use_notebook"
    refused(headlesnb('mcp', '--root', str(tmp_path), '--jupyter-url', url), "argument --jupyter-url: the Jupyter server's URL must be http(s)")
    refused(headlesnb('mcp', '--root', str(tmp_path), env=dict(JUPYTER_URL=url)), "argument --jupyter-url: the Jupyter server's URL must be http(s)")


@pytest.mark.parametrize('extra', [['--kernel', 'inprocess'], ['--kernel', 'kernels.inprocess'], ['--kernel', 'python3'],
                                   ['--kernel', 'nosuch', '--jupyter-url', 'http://127.0.0.1:1']])
def test_kernels_that_can_work_start(tmp_path, extra):
    "The in-process kernel by either documented name, an installed kernelspec, and a server's kernel (the server checks it) all start"
    r = headlesnb('mcp', '--root', str(tmp_path), *extra, env=dict(JUPYTER_URL=''))  # (an empty variable: no server)
    assert r.returncode == 0 and 'headlesnb mcp: serving' in r.stderr, (r.returncode, r.stderr)


@pytest.mark.parametrize('args, said', [(['--tools', 'nosuch'], "argument --tools: unknown tool group 'nosuch'"),
                                        (['--workspace', '../x'], "argument --workspace: invalid workspace name '../x'"),
                                        (['--root', 'README.md'], "argument --root: 'README.md' is not a folder")])
def test_mcp_options_the_engine_refuses_are_refused_at_start(tmp_path, args, said):
    "The engine's own rules for tool groups, workspace names and the root, refused as argparse refuses an option (exit 2, not 1)"
    (tmp_path / 'README.md').write_text('a file')
    args = [a if a != 'README.md' else str(tmp_path / a) for a in args]
    refused(headlesnb('mcp', *(['--root', str(tmp_path)] if '--root' not in args else []), *args), said.replace("'README.md'", repr(str(tmp_path / 'README.md'))))


@pytest.mark.parametrize('front', [('mcp',), ('mcp', '--transport', 'http'), ('serve',)])
def test_a_root_that_is_not_there_is_refused_not_made(tmp_path, front):
    """A `--root` that does not exist is refused as proxy's is (exit 2), not made, at any depth: a typo in an assistant's config
    would otherwise serve it a new, empty folder, where its notebooks would then go; a file is refused too"""
    root = tmp_path / 'typo' / 'deep' / 'root'
    refused(headlesnb(*front, '--root', str(root), '--port', '0'), f"argument --root: {str(root)!r} is not a folder")
    assert not (tmp_path / 'typo').exists()
    (a_file := tmp_path / 'file.txt').write_text('x')
    refused(headlesnb(*front, '--root', str(a_file), '--port', '0'), 'is not a folder')
