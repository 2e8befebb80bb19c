/** Live payments on EVM chains: drivers for the gateway and the jobs that execute them. */
import type { ServerConfig } from '../../config.js'
import type { JobHandler, JobLogger } from '../../jobs/runner.js'
import type { FinalStatuses } from '../../payments/finalStatuses.js'
import { createPaymentFinisher } from '../../payments/finisher.js'
import { relayGuardSettings, releaseReservations } from '../../payments/relayGuards.js'
import { refundJobKinds } from '../../refunds/jobs.js'
import type { Db } from '../../store/db.js'
import { configuredAssets } from '../configured.js'
import type { ChainDriver } from '../types.js'
import { createEvmChain, type EvmChain } from './chain.js'
import { createEvmDriver } from './driver.js'
import { mandateChargeKind } from './mandate.js'
import { mandateChargeJob } from './mandateCharge.js'
import { evmJobKinds } from './outcome.js'
import { depositRefundJob, pushSweepJob } from './push.js'
import { refundJob } from './refund.js'
import { guardFeeBump, relayJob } from './relay.js'
import { createEvmSender } from './sender.js'
import { settleJob } from './settle.js'
import { strayRecoverJob } from './stray.js'
import { setTxStatuses, sweepInFlight } from './transactions.js'
import { verifyTransferJob } from './verifyTransfer.js'
import { createEvmWatcher } from './watcher.js'
import './schema.js'

export type { EvmChain } from './chain.js'
export { evmJobKinds } from './outcome.js'
export { scanEvmPushPayments } from './push.js'
export { relayRefusal, submitRelay } from './relay.js'

export interface EvmRuntimeOptions {
  config: ServerConfig
  db: Db
  log?: JobLogger
  /** Head polling, ms (default the chain's `blockPollMs`, else 250; a local node mines at once, use less). */
  pollingIntervalMs?: number
  /** How long one job run waits for a receipt before handing the job back (default 30 s). */
  receiptTimeoutMs?: number
  /** Seconds an authorization outlives its quote, for the relay to land it (default 600). */
  relayWindowS?: number
  /** A direct-payment hash the node never saw fails after this long (default 10 min). */
  missingTransactionGraceMs?: number
  /** Expected seconds from confirm to a final status, shown to buyers (default 10). */
  etaS?: number
  /** The app's final status answers (FastPath): the finisher keeps what it wrote. */
  finals?: FinalStatuses
}

export interface EvmRuntime {
  chains: readonly EvmChain[]
  /** One per configured `eip155:*` chain, for live mode. */
  drivers: readonly ChainDriver[]
  /** By job kind, for the job runner. */
  jobHandlers: Record<string, JobHandler>
}

const silent: JobLogger = { info() {}, warn() {}, error() {} }

/** Builds the EVM chains of `config.chains` (none configured: an empty runtime). */
export function createEvmRuntime(options: EvmRuntimeOptions): EvmRuntime {
  const log = options.log ?? silent
  const assets = configuredAssets(options.config)
  const chains = Object.entries(options.config.chains)
    .filter(([caip2]) => caip2.startsWith('eip155:'))
    .map(([caip2, chain]) =>
      createEvmChain({
        caip2,
        chain,
        assets: assets[caip2] ?? [],
        log,
        fastPaths: options.config.fastPaths,
        ...(options.pollingIntervalMs !== undefined ? { pollingIntervalMs: options.pollingIntervalMs } : {}),
      }),
    )
  const quoteSettings = {
    db: options.db,
    log,
    etaS: options.etaS ?? 10,
    relayWindowS: options.relayWindowS ?? 600,
    clockSkewS: 120,
  }
  const guards = relayGuardSettings(options.config)
  const jobSettings = {
    chains: new Map(chains.map((c) => [c.caip2, c])),
    relayers: new Map(
      chains.map((chain) => [
        chain.caip2,
        {
          sender: createEvmSender(options.db, chain),
          // A payer's send is bumped only as its relay is sent: simulated again, its reservation raised.
          watcher: createEvmWatcher(options.db, chain, (db, c) =>
            sweepInFlight(db, c, guardFeeBump(db, guards)),
          ),
          finisher: createPaymentFinisher(
            options.db,
            async (trx, payments) => {
              await setTxStatuses(
                trx,
                payments.map((p) => p.txId),
                'succeeded',
              )
              await releaseReservations(
                trx,
                chain.caip2,
                payments.filter((p) => p.releaseReservation === chain.caip2).map((p) => p.paymentId),
              )
            },
            options.finals,
          ),
        },
      ]),
    ),
    receiptTimeoutMs: options.receiptTimeoutMs ?? 30_000,
    settlementIntervalMs: options.config.settlementIntervalMs,
    guards,
    fastPaths: options.config.fastPaths,
  }
  return {
    chains,
    drivers: chains.map((chain) =>
      createEvmDriver(chain, quoteSettings, jobSettings.guards, options.config.fastPaths),
    ),
    jobHandlers: {
      [evmJobKinds.relay]: relayJob(jobSettings),
      [refundJobKinds.evm]: refundJob(jobSettings),
      [evmJobKinds.verifyTransfer]: verifyTransferJob({
        ...jobSettings,
        missingTransactionGraceMs: options.missingTransactionGraceMs ?? 10 * 60_000,
      }),
      [evmJobKinds.settle]: settleJob(jobSettings),
      [mandateChargeKind]: mandateChargeJob(jobSettings),
      [evmJobKinds.pushSweep]: pushSweepJob(jobSettings, options.config),
      [evmJobKinds.depositRefund]: depositRefundJob(jobSettings),
      [evmJobKinds.strayRecover]: strayRecoverJob(jobSettings),
    },
  }
}
