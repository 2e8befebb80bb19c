/** Program ids the Solana adapter recognises (base58). */
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
