"""Composition of the errors-ingest queue: which back-end the settings ask for, and the worker.

`open_error_queue` is what the server builds (in-process on the embedded default, Celery behind
the MongoDB outbox when REDIS_URL is set; the queue's `start` starts the outbox relay).
`run_worker` is `visitor-service worker`: a Celery worker with 5 threads whose tasks run the
async pipeline on one event loop thread that owns the Motor client, the bus and the real
notifier (e-mail and webhooks), which is drained before that loop stops; the pipeline releases
each finished job's outbox entry. The same loop runs the background work that would compete
with requests in a web process: the derivation (tasks/derivation.py), which folds new data into
the figures, the retention purge (tasks/purge.py), and the heatmap renderer (tasks/heatmaps.py),
where Chromium is installed. Threads
rather than prefork, because the work is waiting on MongoDB and a Motor client must not be
created before a fork.
"""

from __future__ import annotations

from dataclasses import dataclass

from config import Settings, SettingsError
from config.metrics import Metrics
from derived import store_setup
from documents.store import Store, open_store
from privacy.sealing import SecretSealer
from realtime.bus import EventBus, RedisBus
from tasks.alerts import AlertEvaluator
from tasks.celery_app import (
    CeleryErrorQueue,
    LoopThread,
    TaskConsumer,
    make_celery_app,
)
from tasks.derivation import FigureDeriver
from tasks.heatmaps import HEATMAP_CHROMIUM, HeatmapRenderer
from tasks.notifications import Notifier
from tasks.notify_port import Notifier as NotifierPort
from tasks.outbox import ErrorOutbox
from tasks.purge import RetentionPurger
from tasks.queue import (
    QUEUE_NAME,
    WORKER_CONCURRENCY,
    ErrorPipeline,
    ErrorQueue,
    InProcessErrorQueue,
    RetryPolicy,
)


def retry_policy(settings: Settings) -> RetryPolicy:
    """The retry policy these settings ask for."""
    return RetryPolicy(base_delay=settings.error_retry_base_seconds)


def error_outbox(settings: Settings, store: Store) -> ErrorOutbox:
    """The outbox of the Celery back-end, with the relay delay these settings ask for."""
    return ErrorOutbox(store, relay_after_seconds=settings.outbox_relay_after_seconds)


def open_error_queue(settings: Settings, *, store: Store, bus: EventBus, metrics: Metrics,
                     notifier: NotifierPort) -> ErrorQueue:
    """Celery over Redis (behind the MongoDB outbox) when REDIS_URL is set, else in-process."""
    if settings.redis_url:
        return CeleryErrorQueue(make_celery_app(settings.redis_url),
                                outbox=error_outbox(settings, store), metrics=metrics,
                                relay_interval_seconds=settings.outbox_scan_seconds)
    pipeline = ErrorPipeline(store, notifier=notifier, bus=bus, metrics=metrics,
                             policy=retry_policy(settings))
    return InProcessErrorQueue(pipeline, capacity=settings.error_queue_capacity)


@dataclass
class WorkerClients:
    """The worker process's own clients: store, live bus and the real notifier."""

    store: Store
    bus: RedisBus
    notifier: Notifier
    #: False when the caller handed the store in: then the caller closes it.
    owns_store: bool = True

    async def close(self) -> None:
        """Let deliveries in flight finish (bounded), then close the bus and the store."""
        # Before the bus and store close, and before the loop stops: a delivery cut off here
        # would be neither sent nor recorded as failed.
        await self.notifier.close()
        await self.bus.close()
        if self.owns_store:
            self.store.close()


async def open_worker_clients(settings: Settings, *, store: Store | None = None
                              ) -> WorkerClients:
    """The worker's clients, created on the loop that will use them; indexes ensured.

    A store handed in stays the caller's to close.
    """
    owns_store = store is None
    store = store or open_store(settings.mongodb_uri, settings.mongodb_database)
    await store_setup.prepare_store(store)
    notifier = Notifier(store, SecretSealer(settings.master_key), public_url=settings.public_url,
                        max_attempts=settings.notify_max_attempts,
                        retry_seconds=settings.notify_retry_seconds,
                        allow_private_webhooks=settings.webhook_allow_private_addresses)
    return WorkerClients(store, RedisBus(settings.redis_url), notifier, owns_store)


def background_work(settings: Settings, store: Store, metrics: Metrics
                    ) -> tuple[FigureDeriver, HeatmapRenderer]:
    """What the worker runs beside the queue: the derivation, folding, and the renderer."""
    return (FigureDeriver(store, metrics, interval_seconds=settings.derivation_interval_seconds,
                          folds=True),
            HeatmapRenderer(store, chromium_path=HEATMAP_CHROMIUM,
                            allow_private_addresses=settings.heatmap_allow_private_addresses))


def retention_purge(settings: Settings, store: Store, metrics: Metrics,
                    notifier: Notifier) -> RetentionPurger:
    """The retention purge (tasks/purge.py), which the worker runs beside the derivation."""
    return RetentionPurger(store, metrics, notifier,
                           interval_seconds=settings.retention_purge_interval_seconds,
                           batch=settings.retention_purge_batch, purges=True)


async def _start(deriver: FigureDeriver, renderer: HeatmapRenderer) -> None:
    """Start the background loops on the running loop (the worker's loop thread)."""
    deriver.start()
    renderer.start()


async def _start_purge(purger: RetentionPurger) -> None:
    """Start the purge's loop on the worker's loop thread."""
    purger.start()


async def _start_alerts(evaluator: AlertEvaluator) -> None:
    """Start the alert rules' evaluation on the worker's loop thread."""
    evaluator.start()


def run_worker(settings: Settings) -> None:
    """Run the errors-ingest Celery worker until it is stopped (blocks; needs the main thread)."""
    if not settings.redis_url or settings.embedded:
        raise SettingsError("REDIS_URL: the worker needs REDIS_URL and MONGODB_URI; the embedded "
                            "default processes errors inside the server")
    runtime = LoopThread()
    runtime.start()
    clients = runtime.run(open_worker_clients(settings))
    metrics = Metrics()
    pipeline = ErrorPipeline(clients.store, notifier=clients.notifier, bus=clients.bus,
                             metrics=metrics, policy=retry_policy(settings),
                             outbox=error_outbox(settings, clients.store))
    deriver, renderer = background_work(settings, clients.store, metrics)
    runtime.run(_start(deriver, renderer))
    purger = retention_purge(settings, clients.store, metrics, clients.notifier)
    runtime.run(_start_purge(purger))
    evaluator = AlertEvaluator(clients.store, metrics, clients.notifier,
                               interval_seconds=settings.alert_evaluation_interval_seconds,
                               purge_interval_seconds=settings.retention_purge_interval_seconds)
    runtime.run(_start_alerts(evaluator))
    app = make_celery_app(settings.redis_url, consumer=TaskConsumer(pipeline, runtime.run))
    try:
        app.Worker(pool="threads", concurrency=WORKER_CONCURRENCY, queues=[QUEUE_NAME],
                   loglevel=settings.log_level, without_mingle=True,
                   without_gossip=True).start()
    finally:
        runtime.run(evaluator.close())
        runtime.run(purger.close())
        runtime.run(renderer.close())
        runtime.run(deriver.close())
        runtime.run(clients.close())
        runtime.stop()
        app.close()
