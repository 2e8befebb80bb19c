/** Job kinds of live Solana (jobs table `kind`); one job per kind and payment. */
export const solanaJobKinds = {
  /** Sends the buyer's signed payment and moves the payment to succeeded or failed. */
  broadcast: 'solana.broadcast',
  /** Moves the collected amount to the merchant's settlement destination. */
  settle: 'solana.settle',
  /** Sends back a payment's deposits an operator chose to refund (docs/push-payments.md). */
  depositRefund: 'solana.deposit_refund',
  /**
   * A subscription's period (docs/subscriptions.md): lands the buyer's delegation first (the first
   * period), then the service's delegated `transferChecked`. Armed again for each retry of the period.
   */
  mandateCharge: 'solana.mandate_charge',
} as const
