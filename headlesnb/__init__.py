"Headless notebook and AI-dialog engine: create, edit and run notebooks and Solveit-style dialogs without a Jupyter server"
__version__ = "0.1.0"

from .startup import defer_slow_imports
defer_slow_imports()  # before anything imports jsonschema (see startup)

from .errors import *
from . import errors as _errors

# The managers load on first use (PEP 562): `headlesnb hook`, which Claude Code waits for on every tool call, imports
# this package, and must not pay for kernels, dialogs and SDKs it never uses.
_LAZY = dict(NotebookManager='notebook', DialogManager='dialog', WorkspaceManager='workspace', AgentManager='agents.tree',
             Engine='engine', execute_notebook='fronts.run_exec', run_notebook='fronts.run_exec', NotebookExecutionError='fronts.run_exec', PapermillExecutionError='fronts.run_exec')
__all__ = [*_errors.__all__, *_LAZY]

def __getattr__(name:str):
    if name not in _LAZY: raise AttributeError(f"module 'headlesnb' has no attribute {name!r}")
    from importlib import import_module
    globals()[name] = value = getattr(import_module(f'.{_LAZY[name]}', __name__), name)
    return value

def __dir__(): return sorted({*globals(), *_LAZY})
