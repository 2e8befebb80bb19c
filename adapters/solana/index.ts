export type {
  AdvanceNonceInstruction,
  ComputeBudgetInstruction,
  CreateAssociatedTokenAccountInstruction,
  DecodedSolanaTransaction,
  MemoInstruction,
  OtherInstruction,
  SolanaInstruction,
  TransferCheckedInstruction,
} from '../../protocol/solana/index.js'
export {
  associatedTokenAddress,
  associatedTokenProgramId,
  computeBudgetProgramId,
  decodeBase64,
  decodeSolanaTransaction,
  encodeBase64,
  memoProgramIds,
  token2022ProgramId,
  tokenProgramId,
} from '../../protocol/solana/index.js'
export type {
  CheckSolanaTransactionParameters,
  InspectSolanaTransactionParameters,
  SolanaPolicyOptions,
} from './inspectSolanaTransaction.js'
export {
  checkSolanaTransaction,
  defaultMaxFeeLamports,
  inspectSolanaTransaction,
} from './inspectSolanaTransaction.js'
export type {
  KitTransaction,
  KitTransactionModifyingSigner,
  KitTransactionPartialSigner,
  KitTransactionSigner,
} from './kitSigner.js'
export { revokeSplMandate, type SolanaMandateNode, solanaMandateStatus } from './mandates.js'
export { type SolanaNode, solanaSignatureStatus } from './signatureStatus.js'
export type {
  SolanaExpiryOptions,
  SolanaInspectorOptions,
  SolanaKeypairSignerOptions,
  SolanaKitSignerOptions,
  SolanaSigner,
  SolanaSignerOptions,
  SolanaWalletStandardSignerOptions,
} from './solanaSigner.js'
export { solanaInspector, solanaSigner, solanaSignTransactionMethod } from './solanaSigner.js'
export type {
  SolanaSignTransactionFeature,
  SolanaSignTransactionFeatureInput,
  SolanaSignTransactionInput,
  SolanaSignTransactionOutput,
  WalletStandardSolanaAccount,
} from './walletStandard.js'
export { isUserRejection, walletStandardChains } from './walletStandard.js'
export { solanaX402Builder, type X402SolanaNode } from './x402.js'
