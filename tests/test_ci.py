"""CI tests what a new user installs: the suite runs in a venv of its own made from pyproject.toml, not on the
machine's site-packages (which can hold older releases than a new user gets, and packages the project forgot to list).

.ci/run sets that up; these checks run under CI (CI=true, as CI runs .ci/run) and say so where they would fail."""
import os, site, subprocess, sys, sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
under_ci = pytest.mark.skipif(os.environ.get('CI') != 'true', reason='checks the environment .ci/run makes (CI=true)')


@under_ci
def test_the_suite_runs_in_a_venv_that_does_not_see_the_machines_site_packages():
    assert sys.prefix != sys.base_prefix, f'pytest runs on {sys.executable}, not in a venv'
    base = {sysconfig.get_paths(vars={'base': sys.base_prefix, 'platbase': sys.base_prefix})[k] for k in ('purelib', 'platlib')}
    seen = [p for p in sys.path if any(p.startswith(b) for b in base)]
    assert not seen, f'the base interpreter\'s site-packages are on sys.path: {seen}'
    assert not site.ENABLE_USER_SITE, 'the user site-packages are on sys.path'


@under_ci
def test_headlesnb_under_test_is_this_checkout_installed_from_its_pyproject():
    import headlesnb
    assert Path(headlesnb.__file__).resolve().is_relative_to(ROOT), f'headlesnb imported from {headlesnb.__file__}'
    assert list(Path(sysconfig.get_paths()['purelib']).glob('headlesnb-*.dist-info')), 'headlesnb is not installed in the venv under test'
    # every console command the tests start is the venv's own
    out = subprocess.run(['bash', '-c', 'command -v headlesnb nbdev-test'], capture_output=True, text=True).stdout.split()
    assert out and all(Path(p).resolve().is_relative_to(Path(sys.prefix).resolve()) for p in out), out


def test_ci_script_makes_fresh_venvs_and_runs_the_readme_test_command():
    "What .ci/run must keep doing (read, not run: running it is CI itself)"
    run = (ROOT / '.ci' / 'run').read_text()
    assert 'uv venv' in run and '--resolution lowest-direct' in run
    readme = (ROOT / 'README.md').read_text()
    cmd = 'bash tests/setup.sh && nbdev-test && python -m pytest'
    assert cmd in readme and cmd in run, 'the README test command and .ci/run have drifted apart'
    assert run.index('bin/activate') < run.index(cmd), 'the test command must run inside the fresh venv'


def test_a_failing_step_of_the_test_command_ends_ci():
    "Bash's set -e does not end a script at a failure inside an && list (only at its last command): .ci/run's line must"
    cmd = 'bash tests/setup.sh && nbdev-test && python -m pytest'
    line = next(l for l in (ROOT / '.ci' / 'run').read_text().splitlines() if cmd in l)
    for failing in ('false && true && true', 'true && false && true', 'true && true && false'):
        r = subprocess.run(['bash', '-c', f'set -euo pipefail\n{line.replace(cmd, failing)}\necho went on'], capture_output=True, text=True)
        assert r.returncode != 0 and 'went on' not in r.stdout, (failing, line)
