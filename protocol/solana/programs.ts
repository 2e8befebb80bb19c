/** Program ids the Solana decoder recognises (base58). */
export const systemProgramId = '11111111111111111111111111111111'
export const computeBudgetProgramId = 'ComputeBudget111111111111111111111111111111'
export const associatedTokenProgramId = 'ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL'
export const tokenProgramId = 'TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA'
export const token2022ProgramId = 'TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb'
export const memoProgramIds = [
  'MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr',
  'Memo1UhkJRfHyvLMcVucJwxXeuD728EqVDDwQDxFMNo',
] as const

/** SPL Token instruction tag of `TransferChecked` (same in Token-2022). */
export const transferCheckedTag = 12
/** SPL Token instruction tag of `ApproveChecked` (same in Token-2022): a delegation, a subscription's mandate. */
export const approveCheckedTag = 13
/** SPL Token instruction tag of `Revoke` (same in Token-2022): ends a delegation. */
export const revokeTag = 5

/** Compute-budget instruction tags (the first data byte). */
export const computeBudgetTags = {
  heapFrame: 1,
  unitLimit: 2,
  unitPrice: 3,
  loadedAccountsDataSize: 4,
} as const

/** System program instruction index (u32 LE) of `AdvanceNonceAccount`. */
export const advanceNonceAccountTag = 4

/**
 * Precompiles: each instruction declares, in its first data byte, signatures the runtime charges the
 * fee payer for like the transaction's own, whether or not they verify.
 */
export const precompileProgramIds = [
  'Ed25519SigVerify111111111111111111111111111',
  'KeccakSecp256k11111111111111111111111111111',
  'Secp256r1SigVerify1111111111111111111111111',
] as const
