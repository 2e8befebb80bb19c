import type { LiveRuntime } from './chains/live.js'
import type { ServerConfig } from './config.js'
import type { JobHandler } from './jobs/runner.js'
import { captureExpiryJob, captureExpiryJobKind } from './payments/capture.js'
import { refundJobKinds } from './refunds/jobs.js'
import { testRefundJob } from './refunds/sandbox.js'
import { webhookDeliveryJob, webhookJobKind } from './webhooks/deliver.js'

/**
 * Every job the server runs, by kind: live mode's (relays, settlements, refunds per chain family) and
 * the mode-independent ones. The one registry the job runner claims from and the metrics and
 * `caipay status` report on (a kind with nothing queued reads 0 there), so no list of kinds can drift.
 */
export function serverJobHandlers(
  config: ServerConfig,
  live: Pick<LiveRuntime, 'jobHandlers'>,
): Readonly<Record<string, JobHandler>> {
  return {
    ...live.jobHandlers,
    [webhookJobKind]: webhookDeliveryJob(config),
    [refundJobKinds.test]: testRefundJob(),
    [captureExpiryJobKind]: captureExpiryJob(config.sandboxRefundDelayMs),
  }
}
