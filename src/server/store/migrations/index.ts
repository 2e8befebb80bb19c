import type { Migration } from 'kysely'
import * as core from './001_core.js'
import * as gateway from './002_gateway.js'
import * as evm from './003_evm.js'
import * as solana from './004_solana.js'
import * as listIndexes from './005_list_indexes.js'
import * as paymentEvents from './006_payment_events.js'
import * as wcp from './007_wcp.js'
import * as credentialNotify from './008_credential_notify.js'
import * as webhooks from './009_webhooks.js'
import * as eventNotifySubscribed from './010_event_notify_subscribed.js'
import * as eventDispatchUnsubscribed from './011_event_dispatch_unsubscribed.js'
import * as evmDeploy from './012_evm_deploy.js'
import * as x402 from './013_x402.js'
import * as evmSenderNonce from './014_evm_sender_nonce.js'
import * as refunds from './015_refunds.js'
import * as settlementBatches from './016_settlement_batches.js'
import * as paymentStatusNotify from './017_payment_status_notify.js'
import * as ledger from './018_ledger.js'
import * as relayGuards from './019_relay_guards.js'
import * as capture from './020_capture.js'
import * as push from './021_push.js'
import * as subscriptions from './022_subscriptions.js'
import * as observability from './023_observability.js'
import * as relayReservations from './024_relay_reservations.js'
import * as evmPush from './026_evm_push.js'
import * as evmMandates from './027_evm_mandates.js'
import * as solanaMandates from './028_solana_mandates.js'
import * as captureReturns from './029_capture_returns.js'
import * as evmStrayRecoveries from './030_evm_stray_recoveries.js'
import * as jobRearm from './032_job_rearm.js'
import * as evmCancellations from './033_evm_cancellations.js'
import * as groupReservations from './034_group_reservations.js'
import * as evmCancelCode from './036_evm_cancel_code.js'
import * as relayGuardRaise from './037_relay_guard_raise.js'

/**
 * Every migration, by name; names sort in the order they run. Add a module with `up`/`down` and
 * one line here (e.g. `'002_gateway': gateway`).
 */
export const migrations: Record<string, Migration> = {
  '001_core': core,
  '002_gateway': gateway,
  '003_evm': evm,
  '004_solana': solana,
  '005_list_indexes': listIndexes,
  '006_payment_events': paymentEvents,
  '007_wcp': wcp,
  '008_credential_notify': credentialNotify,
  '009_webhooks': webhooks,
  '010_event_notify_subscribed': eventNotifySubscribed,
  '011_event_dispatch_unsubscribed': eventDispatchUnsubscribed,
  '012_evm_deploy': evmDeploy,
  '013_x402': x402,
  '014_evm_sender_nonce': evmSenderNonce,
  '015_refunds': refunds,
  '016_settlement_batches': settlementBatches,
  '017_payment_status_notify': paymentStatusNotify,
  '018_ledger': ledger,
  '019_relay_guards': relayGuards,
  '020_capture': capture,
  '023_observability': observability,
  '021_push': push,
  '022_subscriptions': subscriptions,
  '024_relay_reservations': relayReservations,
  '026_evm_push': evmPush,
  '027_evm_mandates': evmMandates,
  '028_solana_mandates': solanaMandates,
  '029_capture_returns': captureReturns,
  '030_evm_stray_recoveries': evmStrayRecoveries,
  '032_job_rearm': jobRearm,
  '033_evm_cancellations': evmCancellations,
  '034_group_reservations': groupReservations,
  '036_evm_cancel_code': evmCancelCode,
  '037_relay_guard_raise': relayGuardRaise,
}
