"""The embedded mode's broker: kombu's filesystem transport, with each message written
whole before it shows in the queue folder.

kombu's own `_put` creates `<time>_<uuid>.<queue>.msg` in the queue folder and then
writes it, while a consumer polling the folder moves any file it lists away and reads
it: one that came between the two read an empty file, and the worker stopped on the
JSON error ("Unrecoverable error: JSONDecodeError"). Here the message is written under
a name no consumer takes (`.<name>.part`) and renamed into place once complete (a
rename within one folder is atomic). `filesystem://` resolves to this transport in every
process that loads the Celery app (config.celery imports this module first)."""

import os
import uuid
from time import monotonic

from kombu.exceptions import ChannelError
from kombu.transport import TRANSPORT_ALIASES, filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps


class Channel(filesystem.Channel):
    def _put(self, queue, message, **kwargs):  # type: ignore[override]  # as kombu's filesystem Channel
        """Put `message` onto `queue`: written aside, then renamed into the folder."""
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = os.path.join(self.data_folder_out, f".{name}.part")
        try:
            with open(partial, "wb") as f:
                f.write(str_to_bytes(dumps(message)))
            os.replace(partial, final)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel


TRANSPORT_ALIASES["filesystem"] = "config.broker:Transport"
