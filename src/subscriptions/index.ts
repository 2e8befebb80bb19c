// caipay/subscriptions: what lets a wallet sign a subscription's mandate within its terms, and list and
// revoke the mandates it granted (docs/subscriptions.md). An entry of its own so the wallet core stays
// within its budget (src/core.test.ts measures both).

export type {
  GrantedMandate,
  InspectedMandate,
  MandateContext,
  MandateGrant,
  MandatePolicy,
  MandateStatus,
  StoredMandate,
} from '../actions/types.js'
export {
  checkMandate,
  mandateBound,
  mandateDeadlineSlackS,
  maxMandatePeriods,
  periodStart,
} from './mandate.js'
export {
  createMandates,
  type MandateStore,
  type Mandates,
  type MandatesOptions,
  type MandateView,
  memoryMandateStore,
  toInspected,
} from './mandates.js'
