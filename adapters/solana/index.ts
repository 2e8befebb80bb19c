export { decodeBase64, encodeBase64 } from './base64.js'
export type {
  ComputeBudgetInstruction,
  CreateAssociatedTokenAccountInstruction,
  DecodedSolanaTransaction,
  MemoInstruction,
  OtherInstruction,
  SolanaInstruction,
  TransferCheckedInstruction,
} from './decodeSolanaTransaction.js'
export { associatedTokenAddress, decodeSolanaTransaction } from './decodeSolanaTransaction.js'
export type {
  CheckSolanaTransactionParameters,
  InspectSolanaTransactionParameters,
  SolanaPolicyOptions,
} from './inspectSolanaTransaction.js'
export { checkSolanaTransaction, inspectSolanaTransaction } from './inspectSolanaTransaction.js'
export {
  associatedTokenProgramId,
  computeBudgetProgramId,
  memoProgramIds,
  token2022ProgramId,
  tokenProgramId,
} from './programs.js'
export type {
  SolanaKeypairSignerOptions,
  SolanaSigner,
  SolanaSignerOptions,
  SolanaWalletStandardSignerOptions,
} from './solanaSigner.js'
export { solanaSigner, solanaSignTransactionMethod } from './solanaSigner.js'
export type {
  SolanaSignTransactionFeature,
  SolanaSignTransactionFeatureInput,
  SolanaSignTransactionInput,
  SolanaSignTransactionOutput,
  WalletStandardSolanaAccount,
} from './walletStandard.js'
export { isUserRejection, walletStandardChains } from './walletStandard.js'
