/**
 * The x402 v2 facilitator wire format, as `@x402/core`'s `HTTPFacilitatorClient` (2.27) sends and reads
 * it: `POST /verify` and `POST /settle` take `{x402Version, paymentPayload, paymentRequirements}`;
 * `GET /supported` answers `{kinds, extensions, signers}`. Objects stay open (x402 adds fields between
 * versions); what the facilitator decides on is checked where it is used.
 */
import * as z from 'zod/mini'

const Text = z.string().check(z.minLength(1), z.maxLength(4096))

export const Requirements = z.looseObject({
  scheme: Text,
  network: Text,
  amount: z.string().check(z.regex(/^\d{1,78}$/)),
  asset: Text,
  payTo: Text,
  maxTimeoutSeconds: z.number().check(z.positive()),
  extra: z.optional(z.nullable(z.record(z.string(), z.unknown()))),
})
export type Requirements = z.infer<typeof Requirements>

export const PaymentPayload = z.looseObject({
  x402Version: z.literal(2),
  accepted: Requirements,
  payload: z.record(z.string(), z.unknown()),
  extensions: z.optional(z.nullable(z.record(z.string(), z.unknown()))),
})
export type PaymentPayload = z.infer<typeof PaymentPayload>

export const FacilitatorRequest = z.looseObject({
  x402Version: z.literal(2),
  paymentPayload: PaymentPayload,
  paymentRequirements: Requirements,
})
export type FacilitatorRequest = z.infer<typeof FacilitatorRequest>

export interface VerifyResponse {
  isValid: boolean
  invalidReason?: string
  invalidMessage?: string
  payer?: string
}

export interface SettleResponse {
  success: boolean
  errorReason?: string
  errorMessage?: string
  payer?: string
  transaction: string
  network: string
  extra?: Record<string, unknown>
}

export interface SupportedKind {
  x402Version: 2
  scheme: 'exact'
  network: string
  extra?: Record<string, unknown>
}

export interface SupportedResponse {
  kinds: SupportedKind[]
  extensions: string[]
  signers: Record<string, string[]>
}

/** The `payment-identifier` extension's id, when the client sent a well-formed one (16-128 of [A-Za-z0-9_-]). */
export function paymentIdentifier(payload: PaymentPayload): string | undefined {
  const extension = payload.extensions?.['payment-identifier']
  if (!extension || typeof extension !== 'object') return undefined
  const info = (extension as { info?: unknown }).info
  const id = info && typeof info === 'object' ? (info as { id?: unknown }).id : undefined
  return typeof id === 'string' && /^[A-Za-z0-9_-]{16,128}$/.test(id) ? id : undefined
}

/**
 * Why a payload does not pay a requirement. The x402 reference facilitators' words where one exists, so
 * a resource server's handling of them carries over; caipay's own for what only caipay checks.
 */
export const invalidReasons = {
  scheme: 'unsupported_scheme',
  network: 'unsupported_network',
  networkMismatch: 'invalid_network_mismatch',
  asset: 'unsupported_asset',
  payload: 'unsupported_payload_type',
  payToUnknown: 'pay_to_not_a_merchant_destination',
  evmRecipient: 'invalid_exact_evm_recipient_mismatch',
  evmValue: 'invalid_exact_evm_payload_authorization_value_mismatch',
  evmValidBefore: 'invalid_exact_evm_payload_authorization_valid_before',
  evmValidAfter: 'invalid_exact_evm_payload_authorization_valid_after',
  evmSignature: 'invalid_exact_evm_signature',
  evmTokenName: 'invalid_exact_evm_token_name_mismatch',
  evmTokenVersion: 'invalid_exact_evm_token_version_mismatch',
  evmNonceUsed: 'invalid_exact_evm_nonce_already_used',
  evmBalance: 'invalid_exact_evm_insufficient_balance',
  evmSimulation: 'invalid_exact_evm_transaction_simulation_failed',
  evmFailed: 'invalid_exact_evm_transaction_failed',
  svmFeePayer: 'invalid_exact_svm_fee_payer_not_managed_by_facilitator',
  svmDecode: 'invalid_exact_svm_payload_transaction_could_not_be_decoded',
  svmFeePayerUsed: 'invalid_exact_svm_payload_transaction_fee_payer_transferring_funds',
  svmInstructions: 'invalid_exact_svm_payload_transaction_instructions_length',
  svmComputeLimit: 'invalid_exact_svm_payload_transaction_instructions_compute_limit_instruction',
  svmComputePrice: 'invalid_exact_svm_payload_transaction_instructions_compute_price_instruction_too_high',
  svmNoTransfer: 'invalid_exact_svm_payload_no_transfer_instruction',
  svmMint: 'invalid_exact_svm_payload_mint_mismatch',
  svmRecipient: 'invalid_exact_svm_payload_recipient_mismatch',
  svmAmount: 'invalid_exact_svm_payload_amount_mismatch',
  svmSignature: 'invalid_exact_svm_payload_signature_invalid',
  svmUnknownInstruction: 'invalid_exact_svm_payload_unknown_optional_instruction',
  svmSimulation: 'invalid_exact_svm_transaction_simulation_failed',
  svmFailed: 'invalid_exact_svm_transaction_failed',
  identifierConflict: 'payment_identifier_conflict',
  /** The payer's earlier settlement failed on chain after its simulation: refused for a cool-down. */
  payerCoolingDown: 'payer_cooling_down',
  /** The caller's credential has spent its executor fee budget for the window (failed sends). */
  gasBudgetExhausted: 'executor_gas_budget_exhausted',
  /** The payer's own executor fee budget for the window is spent (checked before the credential's). */
  payerGasBudgetExhausted: 'payer_gas_budget_exhausted',
  pending: 'settlement_pending',
} as const
