// What a shop's own bundle holds of @sentry/browser for errors and session replay.
import { init, replayIntegration } from '@sentry/browser';

window.Sentry = { init, replayIntegration };
