import type { FailedTransactionMetadata } from 'litesvm'

/** A JSON-RPC error as a Solana validator returns it (`{code, message, data?}`). */
export class RpcError extends Error {
  override readonly name = 'RpcError'
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message)
  }
}

// litesvm hands these out as `const enum` numbers; with isolatedModules we cannot use the
// ambient enums, so the names are listed here in the enum's order (litesvm 1.x internal.d.ts).
const transactionErrorNames = [
  'AccountInUse',
  'AccountLoadedTwice',
  'AccountNotFound',
  'ProgramAccountNotFound',
  'InsufficientFundsForFee',
  'InvalidAccountForFee',
  'AlreadyProcessed',
  'BlockhashNotFound',
  'CallChainTooDeep',
  'MissingSignatureForFee',
  'InvalidAccountIndex',
  'SignatureFailure',
  'InvalidProgramForExecution',
  'SanitizeFailure',
  'ClusterMaintenance',
  'AccountBorrowOutstanding',
  'WouldExceedMaxBlockCostLimit',
  'UnsupportedVersion',
  'InvalidWritableAccount',
  'WouldExceedMaxAccountCostLimit',
  'WouldExceedAccountDataBlockLimit',
  'TooManyAccountLocks',
  'AddressLookupTableNotFound',
  'InvalidAddressLookupTableOwner',
  'InvalidAddressLookupTableData',
  'InvalidAddressLookupTableIndex',
  'InvalidRentPayingAccount',
  'WouldExceedMaxVoteCostLimit',
  'WouldExceedAccountDataTotalLimit',
  'MaxLoadedAccountsDataSizeExceeded',
  'ResanitizationNeeded',
  'InvalidLoadedAccountsDataSizeLimit',
  'UnbalancedTransaction',
  'ProgramCacheHitMaxLimit',
  'CommitCancelled',
] as const

const instructionErrorNames = [
  'GenericError',
  'InvalidArgument',
  'InvalidInstructionData',
  'InvalidAccountData',
  'AccountDataTooSmall',
  'InsufficientFunds',
  'IncorrectProgramId',
  'MissingRequiredSignature',
  'AccountAlreadyInitialized',
  'UninitializedAccount',
  'UnbalancedInstruction',
  'ModifiedProgramId',
  'ExternalAccountLamportSpend',
  'ExternalAccountDataModified',
  'ReadonlyLamportChange',
  'ReadonlyDataModified',
  'DuplicateAccountIndex',
  'ExecutableModified',
  'RentEpochModified',
  'NotEnoughAccountKeys',
  'AccountDataSizeChanged',
  'AccountNotExecutable',
  'AccountBorrowFailed',
  'AccountBorrowOutstanding',
  'DuplicateAccountOutOfSync',
  'InvalidError',
  'ExecutableDataModified',
  'ExecutableLamportChange',
  'ExecutableAccountNotRentExempt',
  'UnsupportedProgramId',
  'CallDepth',
  'MissingAccount',
  'ReentrancyNotAllowed',
  'MaxSeedLengthExceeded',
  'InvalidSeeds',
  'InvalidRealloc',
  'ComputationalBudgetExceeded',
  'PrivilegeEscalation',
  'ProgramEnvironmentSetupFailure',
  'ProgramFailedToComplete',
  'ProgramFailedToCompile',
  'Immutable',
  'IncorrectAuthority',
  'AccountNotRentExempt',
  'InvalidAccountOwner',
  'ArithmeticOverflow',
  'UnsupportedSysvar',
  'IllegalOwner',
  'MaxAccountsDataAllocationsExceeded',
  'MaxAccountsExceeded',
  'MaxInstructionTraceLengthExceeded',
  'BuiltinProgramsMustConsumeComputeUnits',
  'BorshIoError',
] as const

type LiteSvmTransactionError = ReturnType<FailedTransactionMetadata['err']>

/** The `TransactionError` JSON a validator puts in `err` (e.g. `{"InstructionError":[0,{"Custom":1}]}`). */
export function transactionErrorJson(error: LiteSvmTransactionError): unknown {
  if (typeof error === 'number') return transactionErrorNames[error] ?? `UnknownError${error}`
  // The native classes are not all exported, so tell them apart by constructor name.
  const raw = error as unknown as Record<string, unknown> & { err?: () => unknown }
  switch (error.constructor.name) {
    case 'TransactionErrorInstructionError':
      return { InstructionError: [raw.index, instructionErrorJson(raw.err?.())] }
    case 'TransactionErrorDuplicateInstruction':
      return { DuplicateInstruction: raw.index }
    case 'TransactionErrorInsufficientFundsForRent':
      return { InsufficientFundsForRent: { account_index: raw.accountIndex } }
    case 'TransactionErrorProgramExecutionTemporarilyRestricted':
      return { ProgramExecutionTemporarilyRestricted: { account_index: raw.accountIndex } }
    default:
      return error.toString()
  }
}

function instructionErrorJson(error: unknown): unknown {
  if (typeof error === 'number') return instructionErrorNames[error] ?? `UnknownError${error}`
  const raw = error as { code?: number; msg?: string; constructor: { name: string } }
  if (raw.constructor.name === 'InstructionErrorCustom') return { Custom: raw.code }
  if (raw.constructor.name === 'InstructionErrorBorshIo') return { BorshIoError: raw.msg }
  return String(error)
}

/** Errors that still land the transaction (fee charged, status recorded with `err`), as on a validator. */
export function landsOnChain(errorJson: unknown): boolean {
  if (typeof errorJson !== 'object' || errorJson === null) return false
  return (
    'InstructionError' in errorJson ||
    'InsufficientFundsForRent' in errorJson ||
    'DuplicateInstruction' in errorJson ||
    'ProgramExecutionTemporarilyRestricted' in errorJson
  )
}

const simpleMessages: Record<string, string> = {
  AlreadyProcessed: 'This transaction has already been processed',
  BlockhashNotFound: 'Blockhash not found',
  AccountNotFound: 'Attempt to debit an account but found no record of a prior credit.',
  InsufficientFundsForFee: 'Insufficient funds for fee',
  SignatureFailure: 'Transaction did not pass signature verification',
}

/** The validator's wording of a preflight failure, e.g. `Error processing Instruction 0: custom program error: 0x1`. */
export function describeTransactionError(errorJson: unknown): string {
  if (typeof errorJson === 'string') return simpleMessages[errorJson] ?? errorJson
  if (typeof errorJson === 'object' && errorJson !== null && 'InstructionError' in errorJson) {
    const [index, inner] = errorJson.InstructionError as [number, unknown]
    const detail =
      typeof inner === 'object' && inner !== null && 'Custom' in inner
        ? `custom program error: 0x${Number(inner.Custom).toString(16)}`
        : typeof inner === 'string'
          ? inner
          : JSON.stringify(inner)
    return `Error processing Instruction ${index}: ${detail}`
  }
  return JSON.stringify(errorJson)
}
