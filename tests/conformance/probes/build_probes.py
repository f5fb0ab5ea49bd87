"""Writes the probe notebooks: one per behaviour in which an in-process kernel used to differ from Jupyter
(issue 14). Each is run by nbclient (for the reference) and by headlesnb, and compared cell by cell.

    python tests/conformance/probes/build_probes.py      # the tests make their nbclient references anew
"""
from pathlib import Path
import nbformat

PROBES = {
'order': [  # outputs in the order produced, streams split as ipykernel sends them
    "import sys, time\nfrom IPython.display import display, HTML\nprint('a'); print('b', file=sys.stderr); print('c')\ndisplay('d')\nprint('e')\n'f'",
    "print('p', end='')\nprint('q')\nsys.stderr.write('e1')\nprint('r')",
    "print('t1')\ntime.sleep(0.5)\nprint('t2', flush=True)\nprint('t3')\ndisplay(HTML('<b>x</b>'))\nprint('t4', file=sys.stderr)\n1/0",
    "for i in range(3):\n    print(i)\n    display(i)\n    sys.stderr.write(f'err{i}\\n')",
    "print('before value')\n42",
],
'clear_output': [
    "from IPython.display import clear_output, display\nprint('x')\nclear_output()\nprint('y')\nclear_output(wait=True)\nprint('z')",
    "import time\nfor i in range(4):\n    clear_output(wait=True)\n    print(f'step {i}')\n    time.sleep(0.05)",
    "display('kept')\nclear_output(wait=True)",
    "print('a')\nclear_output()\ndisplay('b')\nclear_output()",
],
'update_display': [
    "from IPython.display import display, update_display, HTML\nh = display('one', display_id=True)\nprint('mid')\nh.update('two')",
    "display('A', display_id='abc')\ndisplay(HTML('<i>A</i>'), display_id='html')",
    "update_display('B', display_id='abc')\nprint('between')",
    "display('C', display_id='abc')\nupdate_display(HTML('<i>C</i>'), display_id='html')",
    "h2 = display('x', display_id=True)\nfor i in range(3): h2.update(i)",
],
'pager': [
    "len?", "%quickref", "print??", "import json\n%pdoc json.dumps", "%page 'paged text'", "x = 1\nx?\nprint('after help')",
],
'tracebacks': [
    "def f(): return 1/0\ndef g(): return f()\ng()",
    "1 +",
    "undefined_name",
    "try:\n    {}['k']\nexcept KeyError as e:\n    raise ValueError('chained') from e",
    "raise KeyboardInterrupt",
    "raise SystemExit(3)",
    "class MyError(Exception): pass\nraise MyError('custom', 2)",
    "import json\njson.loads('{bad')",
    "print('out first')\nassert False, 'assertion text'",
],
'last_traceback': [
    "def f(): return 1/0\nf()",
    "%tb",
    "import sys\nsys.last_type, sys.last_value, sys.last_traceback is not None",
    "%debug",
    "print('still alive')",
],
# (each raise on a line of its own: for `def f(self): raise X` on one line, which of the two statements IPython's
# traceback (stack_data) takes the scope from depends on memory addresses, so its context lines vary between runs)
'repr_errors': [
    "class R:\n    def _repr_html_(self):\n        raise ValueError('bad html')\n    def __repr__(self):\n        return 'R()'\nR()",
    "class Q:\n    def __repr__(self):\n        raise ValueError('bad repr')\nQ()",
    "from IPython.display import display\nclass M:\n    def _repr_markdown_(self):\n        raise RuntimeError('bad md')\ndisplay(M())\nprint('after')",
    "print(R())",
],
'stdin': [
    "input('name? ')",
    "import getpass\ngetpass.getpass()",
    "print('before')\nx = input()",
],
'exit': [
    "x = 1\nprint('before exit')",
    "print('bye'); exit(); print('after exit')",
],
'pandas': [
    "import pandas as pd\nwide = pd.DataFrame({f'column_{i}': range(3) for i in range(30)})\nwide",
    "print(wide)",
    "pd.get_option('display.width'), pd.io.formats.console.in_interactive_session(), pd.io.formats.console.get_console_size()",
    "long = pd.DataFrame({'a': range(100)})\nlong",
    "wide.describe()",
],
'streams': [
    "import sys\nsys.stdout.encoding, sys.stderr.encoding, sys.stdout.isatty(), type(sys.stdout).__name__, sys.stdout.name",
    "print('unicode: héllo ☃ 日本')",
    "sys.stdout.write('written\\n')",
    "import io\nisinstance(sys.stdout, io.TextIOBase), sys.stdout.writable()",
],
'logging': [
    "import logging, sys\nlog = logging.getLogger('probe')\nh = logging.StreamHandler()\nlog.addHandler(h)\nlog.warning('w1')",
    "log.warning('w2')\nprint('then stdout')",
    "h2 = logging.StreamHandler(sys.stdout)\nh2.setFormatter(logging.Formatter('%(levelname)s:%(message)s'))\nlog.addHandler(h2)\nlog.error('e1')",
    "log.error('e2')",
],
'magics': [
    "%nosuchmagic",
    "%lsmagic",
    "%autosave 0",
    "%store",
    "%%capture cap\nprint('captured')",
    "cap.stdout",
    "%time x = sum(range(10))",
    "%who",
    "%%nosuchcellmagic\nprint(1)",
    "%env PAGER",
],
'nested_run_cell': [
    "get_ipython().run_cell('print(1)\\n2')\n3",
    "r = get_ipython().run_cell('1/0')\nr.success",
],
'main_thread': [
    "import signal\nsignal.signal(signal.SIGUSR1, lambda *a: None)",
    "import threading\nthreading.current_thread() is threading.main_thread()",
    "import os, sys\nos.path.basename(sys.argv[0]), sys.argv[1], {k: os.environ.get(k) for k in ('TERM', 'CLICOLOR', 'FORCE_COLOR', 'CLICOLOR_FORCE', 'PAGER', 'GIT_PAGER', 'MPLBACKEND')}",
    "import argparse\nargparse.ArgumentParser().parse_args()",
    "print('continues')",
],
'big_output': [
    "print('x' * 250_000)",
    "'y' * 150_000",
],
'matplotlib': [
    "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2]);",
    "fig, ax = plt.subplots()\nax.bar(['a', 'b'], [1, 2])\nprint('drawn')",
    "plt.figure()\nplt.plot([0, 1])\nplt.show()\nprint('after show')",
],
'warnings': [
    "import warnings\nwarnings.warn('careful')",
    "def f():\n    warnings.warn('inside', DeprecationWarning, stacklevel=1)\nf()",
    "warnings.warn('shown once per location')\nprint('then out')",
],
'async': [
    "import asyncio\nawait asyncio.sleep(0.01)\nprint('awaited')\n1",
    "async def g():\n    print('in g')\n    return 5\nawait g()",
    "results = await asyncio.gather(*(asyncio.sleep(0.01, result=i) for i in range(3)))\nresults",
],
'shell': [
    "!echo shell-out",
    "%%bash\necho from-bash\necho err-bash >&2",
    "files = !echo a b\nfiles",
    "%%writefile probe_file.txt\nhello file",
    "print(open('probe_file.txt').read())",
],
}

def build(folder=Path(__file__).parent):
    for name, cells in PROBES.items():
        nb = nbformat.v4.new_notebook()
        nb.metadata = {'kernelspec': {'display_name': 'Python 3', 'language': 'python', 'name': 'python3'},
                       'language_info': {'name': 'python'}}
        nb.cells = [nbformat.v4.new_markdown_cell(f'# Probe: {name}\n\nWritten by headlesnb\'s tests/conformance/probes/build_probes.py.')]
        for i, src in enumerate(cells):
            c = nbformat.v4.new_code_cell(src)
            c.id = f'{name[:4]}{i:04d}'.replace('_', 'x')
            nb.cells.append(c)
        nb.cells[0].id = f'{name[:4]}head'.replace('_', 'x')
        nbformat.write(nb, folder / f'probe_{name}.ipynb')

if __name__ == '__main__': build()
