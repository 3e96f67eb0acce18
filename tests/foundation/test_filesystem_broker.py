"""The embedded mode's broker (config/broker.py): a message shows in the queue folder
only once it is written whole, so a consumer never reads a file still empty."""

import os

from kombu import Connection, Exchange, Queue

from config import broker


def _connection(folder) -> Connection:
    return Connection(
        "filesystem://",
        transport_options={
            "data_folder_in": str(folder),
            "data_folder_out": str(folder),
            "control_folder": str(folder),
        },
    )


def test_filesystem_urls_use_the_transport_that_writes_whole_messages(tmp_path):
    with _connection(tmp_path) as connection:
        assert isinstance(connection.transport, broker.Transport)


def test_a_message_shows_in_the_queue_only_once_written_whole(tmp_path, monkeypatch):
    seen_before_rename: list = []
    real_replace = os.replace

    def replace(source, target):
        # Just before the rename: the message is complete aside, and nothing a consumer
        # would take is in the folder.
        seen_before_rename.extend(
            (name, (tmp_path / name).stat().st_size) for name in os.listdir(tmp_path)
        )
        real_replace(source, target)

    monkeypatch.setattr(broker.os, "replace", replace)
    queue = Queue("work", Exchange("work"), routing_key="work")
    with _connection(tmp_path) as connection:
        producer = connection.Producer(serializer="json")
        producer.publish({"n": 1}, exchange=queue.exchange, routing_key="work", declare=[queue])
        [(name, size)] = [(n, s) for n, s in seen_before_rename if n.endswith(".part")]
        assert name.startswith(".") and size > 0
        assert not [n for n, _ in seen_before_rename if n.endswith(".work.msg")]
        received = []
        with connection.Consumer(
            queue, callbacks=[lambda body, m: (received.append(body), m.ack())]
        ):
            connection.drain_events(timeout=2)
    assert received == [{"n": 1}]
