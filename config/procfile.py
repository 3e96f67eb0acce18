"""`make run`'s process manager: honcho, given the time to stop its processes cleanly.

On Ctrl-C honcho sends SIGTERM to every process and SIGKILL to those still running 5 s
later (honcho.manager.KILL_WAIT, a constant with no option). A Celery worker's warm
shutdown on the filesystem broker takes 5 to 7 s (its consumer loop wakes every 1 to 2
s), so it used to end in SIGKILL. Workaround: the same honcho with a longer wait.

    python -m config.procfile start -f Procfile
"""

import sys

import honcho.manager
from honcho.command import main

# Longer than any process's clean stop (gunicorn's graceful timeout is 30 s, but idle
# sync workers stop at once).
honcho.manager.KILL_WAIT = 30

if __name__ == "__main__":
    sys.exit(main())
