"Headless notebook and AI-dialog engine: create, edit and run notebooks and Solveit-style dialogs without a Jupyter server"
__version__ = "0.1.0"

from .errors import *
from .notebook import NotebookManager
from .dialog import DialogManager
from .workspace import WorkspaceManager
from .agents import AgentManager
from . import ws_files, ws_editors, ws_tools, ws_todos, ws_augments, ws_structure  # each adds its idea to every Workspace
from .engine import Engine
from .run import execute_notebook, NotebookExecutionError, PapermillExecutionError
