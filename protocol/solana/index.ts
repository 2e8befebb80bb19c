// What bytes mean on Solana: read by the wallet adapter and by the server alike.
export { associatedTokenAddress, findProgramAddress, isOnCurve, sha256 } from './address.js'
export { decodeBase64, encodeBase64 } from './base64.js'
export {
  type AdvanceNonceInstruction,
  type ApproveCheckedInstruction,
  bytesEqual,
  type ComputeBudgetInstruction,
  type CreateAssociatedTokenAccountInstruction,
  computeBudgetProblem,
  type DecodedSolanaTransaction,
  decodeSolanaTransaction,
  lamportsPerSignature,
  type MemoInstruction,
  maxFeeLamports,
  messageSigners,
  type OtherInstruction,
  type SolanaInstruction,
  splitSolanaTransaction,
  type TransferCheckedInstruction,
} from './decodeSolanaTransaction.js'
export {
  approveCheckedTag,
  associatedTokenProgramId,
  computeBudgetProgramId,
  memoProgramIds,
  precompileProgramIds,
  revokeTag,
  systemProgramId,
  token2022ProgramId,
  tokenProgramId,
  transferCheckedTag,
} from './programs.js'
