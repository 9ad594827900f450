"""Settings: Django core in `base`, then one module per integration (HackSoft's layout).

`DJANGO_SETTINGS_MODULE=config.settings`. The environment is read in `config.env` and these
modules only; importing them starts nothing and writes nothing (a test checks).
"""

from config.settings.actions import *  # noqa: F403
from config.settings.analytics import *  # noqa: F403
from config.settings.api import *  # noqa: F403
from config.settings.base import *  # noqa: F403
from config.settings.chat import *  # noqa: F403
from config.settings.inference import *  # noqa: F403
from config.settings.knowledge import *  # noqa: F403
from config.settings.services import *  # noqa: F403
