import { Counter, collectDefaultMetrics, Histogram, Registry } from 'prom-client'

/**
 * What this process counts as it happens: one registry for the whole process (several apps in one
 * process, as in the tests, add to the same counters; Prometheus sums instances anyway). Recording is a
 * counter increment on a label set looked up once, so the hooks cost next to nothing per request or per
 * change; whatever needs the database or a chain is read at scrape time instead (scrape.ts).
 */
export const processRegistry = new Registry()

collectDefaultMetrics({ register: processRegistry })
// prom-client's own Node gauges whose names end in `_total` (which Prometheus reserves for counters, and
// `promtool check metrics` flags): the same numbers are in nodejs_active_*{type} without the suffix.
for (const name of [
  'nodejs_active_handles_total',
  'nodejs_active_requests_total',
  'nodejs_active_resources_total',
])
  processRegistry.removeSingleMetric(name)

const httpDuration = new Histogram({
  name: 'caipay_http_request_duration_seconds',
  help: 'HTTP requests answered, by route pattern, method and status; _count is the number of requests.',
  labelNames: ['route', 'method', 'status'] as const,
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  registers: [processRegistry],
})

const rateLimited = new Counter({
  name: 'caipay_rate_limit_rejections_total',
  help: 'Requests refused with 429 (rate or abuse limits), by route pattern.',
  labelNames: ['route'] as const,
  registers: [processRegistry],
})

const paymentChanges = new Counter({
  name: 'caipay_payment_transitions_total',
  help:
    'Payment state changes committed by this process, by what the payment became (processing, succeeded, ' +
    'failed, expired, cancelled, settled, refunded), mode and chain (CAIP-2; "none" before an option is chosen).',
  labelNames: ['to', 'mode', 'chain'] as const,
  registers: [processRegistry],
})

const webhookAttempts = new Counter({
  name: 'caipay_webhook_delivery_attempts_total',
  help: 'Webhook delivery attempts by outcome: delivered, retrying (failed, another attempt is scheduled), gave_up.',
  labelNames: ['outcome'] as const,
  registers: [processRegistry],
})

let recording = true

/**
 * Turns this process's counting off (and on again): only to measure what counting costs against not
 * counting, in one process (bench/observability.ts). Production never calls it.
 */
export function setMetricsRecording(enabled: boolean): void {
  recording = enabled
}

/** Label children by a joined key: prom-client hashes the label object on every call otherwise. */
function memo<T>(make: (...labels: string[]) => T): (...labels: string[]) => T {
  const children = new Map<string, T>()
  return (...labels) => {
    const key = labels.join('\u0000')
    let child = children.get(key)
    if (child === undefined) {
      child = make(...labels)
      children.set(key, child)
    }
    return child
  }
}

const knownMethods = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'])
const httpChild = memo((route, method, status) => httpDuration.labels(route!, method!, status!))
const rateLimitedChild = memo((route) => rateLimited.labels(route!))

/**
 * One answered request. `route` is the router's pattern (`/v1/payments/:id`), never the URL, and
 * "unmatched" when no route matched: labels stay few whatever callers send.
 */
export function observeHttpRequest(
  route: string | undefined,
  method: string,
  status: number,
  seconds: number,
): void {
  if (!recording) return
  const routeLabel = route ?? 'unmatched'
  httpChild(routeLabel, knownMethods.has(method) ? method : 'other', String(status)).observe(seconds)
  if (status === 429) rateLimitedChild(routeLabel).inc()
}

const paymentChild = memo((to, mode, chain) => paymentChanges.labels(to!, mode!, chain!))

/**
 * Payments changed by a committed statement (`type` is the event it wrote, `payment.<what it became>`).
 * Called once the change has committed (payments/lifecycle.ts counts from its transaction's after-commit
 * list, store/db.ts afterCommit), so a change rolled back is never counted.
 */
export function countPaymentChanges(
  type: string,
  rows: readonly { mode: string; option_amount: { unit: string } | null }[],
): void {
  if (!recording) return
  const to = type.startsWith('payment.') ? type.slice('payment.'.length) : type
  for (const row of rows) paymentChild(to, row.mode, chainOfUnit(row.option_amount?.unit)).inc()
}

/** `caip19/eip155:8453/erc20:0x...` -> `eip155:8453`. */
function chainOfUnit(unit: string | undefined): string {
  if (unit === undefined || !unit.startsWith('caip19/')) return 'none'
  const slash = unit.indexOf('/', 'caip19/'.length)
  return slash === -1 ? 'none' : unit.slice('caip19/'.length, slash)
}

const webhookChild = memo((outcome) => webhookAttempts.labels(outcome!))

/** One recorded delivery attempt, by the delivery's state after it. */
export function countWebhookAttempt(state: 'pending' | 'succeeded' | 'failed'): void {
  if (!recording) return
  webhookChild(state === 'succeeded' ? 'delivered' : state === 'pending' ? 'retrying' : 'gave_up').inc()
}

const sendToFinalBlocks = new Histogram({
  name: 'caipay_transaction_send_to_final_blocks',
  help:
    'EVM: blocks from the newest block seen when an executor transaction was sent (or its step began ' +
    'waiting) to the block where it had its confirmations, by chain and purpose (relay, settle, refund, deploy).',
  labelNames: ['chain', 'purpose'] as const,
  buckets: [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128],
  registers: [processRegistry],
})

const sendToFinalSlots = new Histogram({
  name: 'caipay_transaction_send_to_final_slots',
  help:
    'Solana: slots from the newest slot seen when a transaction was first sent to the slot at which the ' +
    "chain's commitment was seen, by chain and purpose.",
  labelNames: ['chain', 'purpose'] as const,
  buckets: [1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 256, 512],
  registers: [processRegistry],
})

const feeBumps = new Counter({
  name: 'caipay_fee_bumps_total',
  help: 'EVM replacements sent with higher fees for an executor transaction left pending, by chain.',
  labelNames: ['chain'] as const,
  registers: [processRegistry],
})

const reorgsSeen = new Counter({
  name: 'caipay_chain_reorgs_seen_total',
  help:
    "EVM reorgs this process saw while watching its transactions: the head's block number went back, or " +
    'a receipt seen for a waiting transaction vanished or moved to another block, by chain.',
  labelNames: ['chain'] as const,
  registers: [processRegistry],
})

const blocksChild = memo((chain, purpose) => sendToFinalBlocks.labels(chain!, purpose!))
const slotsChild = memo((chain, purpose) => sendToFinalSlots.labels(chain!, purpose!))

/** A transaction final `distance` blocks (EVM) or slots (Solana) after it was sent. */
export function observeSendToFinal(
  unit: 'block' | 'slot',
  chain: string,
  purpose: string,
  distance: number,
): void {
  ;(unit === 'block' ? blocksChild : slotsChild)(chain, purpose).observe(Math.max(0, distance))
}

export function countFeeBump(chain: string): void {
  feeBumps.labels(chain).inc()
}

export function countReorgSeen(chain: string): void {
  reorgsSeen.labels(chain).inc()
}
