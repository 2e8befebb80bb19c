// caipay/adapters/solana-kit: the Solana adapter without @solana/web3.js, for wallets on @solana/kit
// (its signers and RPC, typed structurally) or on a wallet-standard account. caipay/adapters/solana is
// this plus what needs web3.js: a Keypair signer and the x402 transaction builder.
export type {
  AdvanceNonceInstruction,
  ApproveCheckedInstruction,
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
} from '../solana/inspectSolanaTransaction.js'
export {
  checkSolanaTransaction,
  defaultMaxFeeLamports,
  inspectSolanaTransaction,
} from '../solana/inspectSolanaTransaction.js'
export type {
  KitTransaction,
  KitTransactionModifyingSigner,
  KitTransactionPartialSigner,
  KitTransactionSigner,
} from '../solana/kitSigner.js'
export { revokeSplMandate, type SolanaMandateNode, solanaMandateStatus } from '../solana/mandates.js'
export type { SignatureState, SolanaKitRpc, SolanaNode, SolanaSendingNode } from '../solana/node.js'
export { solanaSignatureStatus } from '../solana/signatureStatus.js'
export type {
  SolanaExpiryOptions,
  SolanaInspectorOptions,
  SolanaKitSignerOptions,
  SolanaSigner,
  SolanaSignerWithoutWeb3Options,
  SolanaWalletStandardSignerOptions,
} from '../solana/signer.js'
export { solanaInspector, solanaSigner, solanaSignTransactionMethod } from '../solana/signer.js'
export type {
  SolanaSignTransactionFeature,
  SolanaSignTransactionFeatureInput,
  SolanaSignTransactionInput,
  SolanaSignTransactionOutput,
  WalletStandardSolanaAccount,
} from '../solana/walletStandard.js'
export { isUserRejection, walletStandardChains } from '../solana/walletStandard.js'
