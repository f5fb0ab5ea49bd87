"Headless notebook and AI-dialog engine: create, edit and run notebooks and Solveit-style dialogs without a Jupyter server"
__version__ = "0.1.0"

from .errors import *
from .notebook import NotebookManager
from .dialog import DialogManager
from .workspace import WorkspaceManager
from .engine import Engine
