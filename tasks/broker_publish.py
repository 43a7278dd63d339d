"""Publishing error jobs to Redis as Celery task messages, from the server's event loop.

The server sends exactly one kind of task, always the same way, so most of what Celery and kombu
work out for each `send_task` is the same every time: the route, the headers Celery builds, the
Redis list the message goes to, its delivery info and priority. kombu also only publishes
synchronously, so the server had to publish from a thread, and that thread's ~100 µs of CPU per
message fought the event loop for the GIL on every request.

`BrokerPublisher` works the static part out once, from the app's own configuration and Celery's
own message builder (`MessageLayout`), and for each job fills in only what differs per message:
the task id, the delivery tag, the `argsrepr` header and the body. A batch then goes to Redis as
one LPUSH of all its messages over redis.asyncio, on the event loop. The stored envelope is the one
kombu's Redis transport stores for `send_task` (Celery message protocol 2, body in base64);
tests/tasks/test_celery_publish.py compares the two, with and without a key prefix and
priorities, and has a real worker run what this publishes.

What this does not do that `send_task` does: it fires no `before_task_publish` /
`after_task_publish` signals (nothing here listens), and it does not declare the queue's binding
in Redis (the worker declares its queues when it starts, and a message waits in the list until
then). A configuration it cannot reproduce (compression, a non-direct exchange, sent events,
another serializer) is refused when the first batch is built, not published differently.
"""

from __future__ import annotations

import base64
import json
import re
from bisect import bisect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from celery import Celery
from kombu.entity import DELIVERY_MODES
from kombu.transport import redis as kombu_redis
from kombu.utils.json import dumps as kombu_dumps
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from documents.accounts import new_id


class UnsupportedBrokerConfiguration(ValueError):
    """The Celery configuration asks for something `BrokerPublisher` would not reproduce."""


@dataclass(frozen=True)
class MessageLayout:
    """What every message of the task shares, worked out once from the app's configuration.

    `pieces` is the serialised message cut at the fields that differ per message: the static
    text, then the name of the field that follows it, and so on, ending with static text. The
    static text is exactly what serialising the whole message gives around those fields, so
    joining the pieces with each message's values gives the message kombu would store.
    """

    #: The Redis list kombu's transport pushes to: key prefix, queue, priority step.
    key: str
    pieces: tuple[str, ...]
    #: The body's JSON before and after the job: `[[job], kwargs, embedded options]`.
    body_prefix: str
    body_suffix: str


def _slot(name: str) -> str:
    """A placeholder for a per-message field in the template message."""
    # A NUL-led text serialises as "\u0000name", which no static part of a message can hold.
    return "\x00" + name


#: The per-message fields, and the placeholders for them in the serialised template.
_SLOTS = ("body", "id", "argsrepr", "delivery_tag")
_SLOT = re.compile(f'"{re.escape(json.dumps(_slot(""))[1:-1])}({"|".join(_SLOTS)})"')


def message_layout(app: Celery, *, queue_name: str, task_name: str) -> MessageLayout:
    """The layout `send_task(task_name, queue=queue_name)` gives this app's messages."""
    conf = app.conf
    if conf.task_compression or conf.task_send_sent_event or conf.task_serializer != "json":
        raise UnsupportedBrokerConfiguration(
            "the error publisher supports JSON messages without compression or sent events")
    options = app.amqp.router.route({"queue": queue_name, "retry": False}, task_name)
    queue = options["queue"]
    if queue.exchange.type != "direct" or options.get("exchange") or options.get("routing_key"):
        raise UnsupportedBrokerConfiguration(
            "the error publisher supports only a direct route to its queue")
    # Celery's own builder, once, for the headers and the embedded options it would send.
    template = app.amqp.create_task_message(
        _slot("id"), task_name, [], None, reply_to=app.thread_oid, create_sent_event=False,
        ignore_result=None, argsrepr=_slot("argsrepr"), **options)
    _args, kwargs, embed = template.body
    mode = queue.exchange.delivery_mode or conf.task_default_delivery_mode
    priority = options.get("priority") or 0
    # kombu's Redis transport stores this: Celery's message, its body in base64, and the
    # properties kombu adds (delivery info, priority, body encoding, delivery tag).
    envelope = kombu_dumps({
        "body": _slot("body"),
        "content-encoding": "utf-8",
        "content-type": "application/json",
        "headers": template.headers,
        "properties": {
            **template.properties,
            "delivery_mode": DELIVERY_MODES.get(mode, mode),
            # Celery turns a direct route into the anonymous exchange with the queue's name.
            "delivery_info": {"exchange": "", "routing_key": queue.name},
            "priority": priority,
            "body_encoding": "base64",
            "delivery_tag": _slot("delivery_tag"),
        },
    })
    body_prefix, body_suffix = kombu_dumps([[_slot("job")], kwargs, embed]).split(
        kombu_dumps(_slot("job")))
    pieces = tuple(_SLOT.split(envelope))
    if set(pieces[1::2]) != set(_SLOTS):
        # Another Celery version may move a field; refusing beats publishing without it.
        raise UnsupportedBrokerConfiguration(
            f"Celery's message no longer holds each of {', '.join(_SLOTS)} where expected")
    return MessageLayout(key=_list_key(conf.broker_transport_options, queue.name, priority),
                         pieces=pieces,
                         body_prefix=body_prefix, body_suffix=body_suffix)


def _list_key(transport_options: dict[str, Any], queue: str, priority: int) -> str:
    """The list kombu's Redis transport keeps `queue`'s messages of `priority` in."""
    channel = kombu_redis.Channel
    steps = transport_options.get("priority_steps", channel.priority_steps)
    # kombu clamps the priority to 0..9 and files it under the highest step not above it.
    clamped = max(min(int(priority), channel.max_priority), channel.min_priority)
    step = steps[bisect(steps, clamped) - 1]
    name = f"{queue}{transport_options.get('sep', channel.sep)}{step}" if step else queue
    return transport_options.get("global_keyprefix", "") + name


def job_json(job: dict[str, Any]) -> str:
    """The job serialised as kombu serialises it."""
    try:
        # A job holds JSON values only, which the standard encoder writes exactly as kombu's
        # subclass of it does, without building an encoder per call (a fifth of a message).
        return json.dumps(job)
    except TypeError:
        return kombu_dumps(job)  # kombu's own forms for datetimes, UUIDs, bytes, ...


def task_message(layout: MessageLayout, job: dict[str, Any], argsrepr: str) -> str:
    """The serialised message for one job, as kombu's Redis transport stores it."""
    body = f"{layout.body_prefix}{job_json(job)}{layout.body_suffix}".encode()
    # Base64 and UUID text never need escaping in JSON, so quotes alone serialise them.
    values = {
        "body": f'"{base64.b64encode(body).decode("ascii")}"',
        "id": f'"{new_id()}"',
        "argsrepr": json.dumps(argsrepr),
        "delivery_tag": f'"{new_id()}"',
    }
    pieces = layout.pieces
    # Even indexes are static text, odd ones the field that goes between.
    return "".join([piece if n % 2 == 0 else values[piece] for n, piece in enumerate(pieces)])


class BrokerPublisher:
    """Pushes task messages to the app's Redis broker, a batch per command, without a thread."""

    def __init__(self, app: Celery, *, queue_name: str, task_name: str) -> None:
        self.app = app
        self.queue_name = queue_name
        self.task_name = task_name
        self._layout: MessageLayout | None = None
        self._client: Redis | None = None

    @property
    def layout(self) -> MessageLayout:
        """The message layout, worked out on first use (the app may be configured after)."""
        if self._layout is None:
            self._layout = message_layout(self.app, queue_name=self.queue_name,
                                          task_name=self.task_name)
        return self._layout

    @property
    def client(self) -> Redis:
        """The Redis client, with the broker's URL and kombu's timeouts; connects on first use."""
        if self._client is None:
            options = self.app.conf.broker_transport_options
            self._client = Redis.from_url(
                self.app.conf.broker_url,
                socket_timeout=options.get("socket_timeout"),
                socket_connect_timeout=options.get("socket_connect_timeout"),
                # One immediate reconnect for a pooled connection Redis has since closed; more
                # would hold the batch, which the outbox relay sends again anyway.
                retry=Retry(NoBackoff(), 1))
        return self._client

    async def publish(self, jobs: list[dict[str, Any]],
                      argsrepr: Callable[[dict[str, Any]], str]) -> None:
        """Push one message per job, in order, in one command; raises if Redis refused it.

        Redis stores all of them or, when it refuses the command, none; when the connection
        fails before the answer, whether it stored them is unknown, so the caller must treat
        any failure as the whole batch not sent.
        """
        layout = self.layout
        # One LPUSH of many values stores them as that many LPUSHes in a row would, the first
        # job nearest the consumer's end, and Redis runs a command whole or not at all.
        await self.client.lpush(layout.key,
                                *[task_message(layout, job, argsrepr(job)) for job in jobs])

    async def close(self) -> None:
        """Release the connections."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None
