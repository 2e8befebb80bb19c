import { encodeBase58 } from '../../src/caip/base58.js'
import { PayError } from '../../src/errors/PayError.js'
import { decodeUtf8 } from '../utf8.js'
import { decodeBase64 } from './base64.js'
import {
  advanceNonceAccountTag,
  approveCheckedTag,
  associatedTokenProgramId,
  computeBudgetProgramId,
  computeBudgetTags,
  memoProgramIds,
  precompileProgramIds,
  systemProgramId,
  token2022ProgramId,
  tokenProgramId,
  transferCheckedTag,
} from './programs.js'

interface InstructionBase {
  /** Position in the message. */
  readonly index: number
  readonly programId: string
  /** Account addresses in instruction order; undefined for accounts loaded from a lookup table. */
  readonly accounts: readonly (string | undefined)[]
  readonly data: Uint8Array
}

export interface ComputeBudgetInstruction extends InstructionBase {
  readonly kind: 'computeBudget'
  /**
   * What it sets, read as the runtime reads it (its data's prefix; bytes after the value are
   * ignored by the runtime too); undefined when the runtime would refuse the data.
   */
  readonly setting?: 'heapFrame' | 'unitLimit' | 'unitPrice' | 'loadedAccountsDataSize'
  /** The value it sets (compute units, micro-lamports per unit, bytes). */
  readonly value?: bigint
}

/**
 * System program `AdvanceNonceAccount`: as the first instruction it makes the blockhash a durable
 * nonce. The runtime matches the data's first four bytes, whatever follows, and so does this.
 */
export interface AdvanceNonceInstruction extends InstructionBase {
  readonly kind: 'advanceNonce'
}

export interface CreateAssociatedTokenAccountInstruction extends InstructionBase {
  readonly kind: 'createAssociatedTokenAccount'
  readonly idempotent: boolean
  readonly payer: string
  readonly account: string
  readonly owner: string
  readonly mint: string
  readonly tokenProgram: string
}

export interface TransferCheckedInstruction extends InstructionBase {
  readonly kind: 'transferChecked'
  readonly source: string
  readonly mint: string
  readonly destination: string
  readonly authority: string
  readonly amount: bigint
  readonly decimals: number
  /**
   * Accounts after the authority: an SPL multisig's co-signers, or the accounts a Token-2022 transfer
   * hook receives.
   */
  readonly extraAccounts: readonly (string | undefined)[]
}

/** SPL `ApproveChecked`: `owner` lets `delegate` move up to `amount` out of `source` until revoked. */
export interface ApproveCheckedInstruction extends InstructionBase {
  readonly kind: 'approveChecked'
  readonly source: string
  readonly mint: string
  readonly delegate: string
  readonly owner: string
  readonly amount: bigint
  readonly decimals: number
  /** Accounts after the owner: an SPL multisig's co-signers. */
  readonly extraAccounts: readonly (string | undefined)[]
}

export interface MemoInstruction extends InstructionBase {
  readonly kind: 'memo'
  readonly text: string
}

/** Anything the adapter does not recognise, or cannot resolve fully. */
export interface OtherInstruction extends InstructionBase {
  readonly kind: 'other'
}

export type SolanaInstruction =
  | ComputeBudgetInstruction
  | AdvanceNonceInstruction
  | CreateAssociatedTokenAccountInstruction
  | TransferCheckedInstruction
  | ApproveCheckedInstruction
  | MemoInstruction
  | OtherInstruction

export interface DecodedSolanaTransaction {
  readonly version: 'legacy' | 0
  readonly feePayer: string
  readonly recentBlockhash: string
  /** Required signers, in signature order. */
  readonly signers: readonly string[]
  /** One entry per signer: the signature, or null while that signer has not signed. */
  readonly signatures: readonly (Uint8Array | null)[]
  readonly instructions: readonly SolanaInstruction[]
  /** True for v0 messages that load accounts from address lookup tables. */
  readonly usesLookupTables: boolean
  /** True when the first instruction advances a nonce account: the transaction never expires. */
  readonly usesDurableNonce: boolean
  /** The exact message bytes that every signature covers. */
  readonly messageBytes: Uint8Array
  /** The wire bytes as given. */
  readonly bytes: Uint8Array
  /** Byte offset of signature `i` in `bytes`. */
  signatureOffset(i: number): number
}

/**
 * Decodes a wire transaction (legacy or v0), given as base64 or bytes, and classifies its
 * instructions. Throws a PayError `invalid_action` when the input is not a transaction.
 */
export function decodeSolanaTransaction(input: string | Uint8Array): DecodedSolanaTransaction {
  const bytes = typeof input === 'string' ? decodeBase64(input) : input
  if (!bytes || bytes.length === 0) throw invalid('The Solana transaction is not valid base64.')

  const [signatureCount, countLength] = readShortVec(bytes)
  const messageOffset = countLength + signatureCount * 64
  if (bytes.length < messageOffset) throw invalid('The Solana transaction cannot be decoded.')
  const messageBytes = bytes.subarray(messageOffset)
  // Read strictly (minimal lengths, no trailing bytes): signatures cover these exact bytes, and a
  // message other readers could take apart differently would be signed over bytes the builder did not mean.
  const message = readMessage(messageBytes)
  const { version, required, keys } = message
  if (signatureCount !== required || required === 0) {
    throw invalid('The Solana transaction has a signature count that does not match its message.')
  }
  if (message.instructions.some((ix) => ix.programIdIndex >= keys.length)) {
    throw invalid('The Solana transaction loads a program id from a lookup table.')
  }
  const signers = keys.slice(0, required)
  const instructions = message.instructions.map((ix, index) =>
    classify(
      index,
      keys[ix.programIdIndex]!,
      ix.accountIndexes.map((i) => keys[i]),
      ix.data,
    ),
  )
  const signatures = Array.from({ length: signatureCount }, (_, i) =>
    bytes.subarray(countLength + i * 64, countLength + (i + 1) * 64),
  )
  return {
    version,
    feePayer: signers[0]!,
    recentBlockhash: message.recentBlockhash,
    signers,
    signatures: signatures.map((signature) =>
      signature.every((byte) => byte === 0) ? null : signature.slice(),
    ),
    instructions,
    usesLookupTables: message.lookupTables > 0,
    usesDurableNonce: instructions[0]?.kind === 'advanceNonce',
    messageBytes,
    bytes,
    signatureOffset: (i) => countLength + i * 64,
  }
}

function classify(
  index: number,
  programId: string,
  accounts: (string | undefined)[],
  data: Uint8Array,
): SolanaInstruction {
  const base = { index, programId, accounts, data }
  const at = (i: number) => accounts[i]
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength)
  if (programId === computeBudgetProgramId)
    return { ...base, kind: 'computeBudget', ...computeBudget(data, view) }
  if (
    programId === systemProgramId &&
    data.length >= 4 &&
    view.getUint32(0, true) === advanceNonceAccountTag
  ) {
    return { ...base, kind: 'advanceNonce' }
  }
  if ((memoProgramIds as readonly string[]).includes(programId)) {
    return { ...base, kind: 'memo', text: decodeUtf8(data) }
  }
  if (programId === associatedTokenProgramId && (data.length === 0 || (data.length === 1 && data[0]! <= 1))) {
    const [payer, account, owner, mint, , tokenProgram] = [at(0), at(1), at(2), at(3), at(4), at(5)]
    if (payer && account && owner && mint && tokenProgram) {
      return {
        ...base,
        kind: 'createAssociatedTokenAccount',
        idempotent: data[0] === 1,
        payer,
        account,
        owner,
        mint,
        tokenProgram,
      }
    }
  }
  if (
    (programId === tokenProgramId || programId === token2022ProgramId) &&
    data[0] === transferCheckedTag &&
    data.length === 10
  ) {
    const [source, mint, destination, authority] = [at(0), at(1), at(2), at(3)]
    if (source && mint && destination && authority) {
      return {
        ...base,
        kind: 'transferChecked',
        source,
        mint,
        destination,
        authority,
        amount: view.getBigUint64(1, true),
        decimals: data[9]!,
        extraAccounts: accounts.slice(4),
      }
    }
  }
  if (
    (programId === tokenProgramId || programId === token2022ProgramId) &&
    data[0] === approveCheckedTag &&
    data.length === 10
  ) {
    const [source, mint, delegate, owner] = [at(0), at(1), at(2), at(3)]
    if (source && mint && delegate && owner) {
      return {
        ...base,
        kind: 'approveChecked',
        source,
        mint,
        delegate,
        owner,
        amount: view.getBigUint64(1, true),
        decimals: data[9]!,
        extraAccounts: accounts.slice(4),
      }
    }
  }
  return { ...base, kind: 'other' }
}

// The runtime reads compute-budget data as a prefix (borsh, trailing bytes ignored): a u8 tag,
// then a u32 (heap frame, unit limit, loaded accounts data size) or a u64 (unit price).
function computeBudget(
  data: Uint8Array,
  view: DataView,
): Pick<ComputeBudgetInstruction, 'setting' | 'value'> {
  const tag = data[0]
  if (tag === computeBudgetTags.unitPrice) {
    return data.length >= 9 ? { setting: 'unitPrice', value: view.getBigUint64(1, true) } : {}
  }
  const setting =
    tag === computeBudgetTags.heapFrame
      ? 'heapFrame'
      : tag === computeBudgetTags.unitLimit
        ? 'unitLimit'
        : tag === computeBudgetTags.loadedAccountsDataSize
          ? 'loadedAccountsDataSize'
          : undefined
  if (setting && data.length >= 5) return { setting, value: BigInt(view.getUint32(1, true)) }
  return {}
}

/** Base fee per signature, lamports. */
export const lamportsPerSignature = 5_000n
/**
 * Compute units the runtime grants when no `SetComputeUnitLimit` says otherwise: up to 200 000 per
 * instruction (3 000 for a builtin since SIMD-0170; counting 200 000 bounds both rules), 3 000 per
 * compute-budget instruction; never more than 1.4 M.
 */
const defaultUnitsPerInstruction = 200_000n
const defaultUnitsPerBudgetInstruction = 3_000n
const maxUnits = 1_400_000n

/**
 * The most the runtime can charge the fee payer for this transaction, lamports, whether it succeeds
 * or fails: the base fee of every signature, its own and those its precompile instructions declare
 * (Ed25519, secp256k1, secp256r1: the first data byte), plus the priority fee, ceil(unit limit x
 * unit price / 10^6). Compute-budget instructions are read as the runtime reads them; the caller
 * refuses a transaction whose compute-budget instructions the runtime would not accept
 * (`computeBudgetProblem`).
 */
export function maxFeeLamports(decoded: DecodedSolanaTransaction): bigint {
  let limit: bigint | undefined
  let price = 0n
  let units = 0n
  let signatures = BigInt(decoded.signers.length)
  for (const ix of decoded.instructions) {
    if (ix.kind !== 'computeBudget') units += defaultUnitsPerInstruction
    else {
      units += defaultUnitsPerBudgetInstruction
      if (ix.setting === 'unitLimit') limit = ix.value!
      else if (ix.setting === 'unitPrice') price = ix.value!
    }
    if ((precompileProgramIds as readonly string[]).includes(ix.programId))
      signatures += BigInt(ix.data[0] ?? 0)
  }
  const requested = limit ?? units
  const capped = requested < maxUnits ? requested : maxUnits
  const priority = (capped * price + 999_999n) / 1_000_000n
  return lamportsPerSignature * signatures + priority
}

/**
 * Why the runtime would not read the transaction's compute-budget instructions as `maxFeeLamports`
 * does, or undefined: an instruction it cannot parse, or one setting given twice.
 */
export function computeBudgetProblem(decoded: DecodedSolanaTransaction): string | undefined {
  const seen = new Set<string>()
  for (const ix of decoded.instructions) {
    if (ix.kind !== 'computeBudget') continue
    if (!ix.setting) return 'unreadable compute-budget instruction'
    if (seen.has(ix.setting)) return `compute-budget ${ix.setting} set twice`
    seen.add(ix.setting)
  }
  return undefined
}

/**
 * A signed wire transaction (legacy or v0), as base64 or bytes, cut into its signatures and the message
 * bytes they cover, checked for layout only: a signature count that is the message header's, and a message
 * after the signatures. Undefined when the input is not laid out so. Decodes nothing else: enough where the
 * message must equal bytes known already, or as a form check before a full decode.
 */
export function splitSolanaTransaction(
  input: string | Uint8Array,
): { signatures: Uint8Array[]; message: Uint8Array } | undefined {
  const bytes = typeof input === 'string' ? decodeBase64(input) : input
  if (!bytes) return undefined
  let count: number
  let offset: number
  try {
    ;[count, offset] = readShortVec(bytes)
  } catch {
    return undefined
  }
  const message = bytes.subarray(offset + count * 64)
  const header = headerAt(message)
  if (count === 0 || message.length < header + 4 || message[header] !== count) return undefined
  const signatures = Array.from({ length: count }, (_, i) =>
    bytes.subarray(offset + i * 64, offset + (i + 1) * 64),
  )
  return { signatures, message }
}

/**
 * The required signers of a message (its first `numRequiredSignatures` static account keys, 32 bytes
 * each), in signature order. Throws a PayError `invalid_action` when the message is shorter than its
 * header says.
 */
export function messageSigners(message: Uint8Array): Uint8Array[] {
  const header = headerAt(message)
  const required = message[header] ?? 0
  const [keyCount, keysLength] = readShortVec(message.subarray(header + 3))
  const keysAt = header + 3 + keysLength
  if (keyCount < required || message.length < keysAt + required * 32)
    throw invalid('The Solana message is shorter than its header says.')
  return Array.from({ length: required }, (_, i) => message.subarray(keysAt + i * 32, keysAt + (i + 1) * 32))
}

/** Where a message's header starts: a versioned message begins with 0x80 | version, a legacy one with it. */
function headerAt(message: Uint8Array): number {
  return (message[0] ?? 0) & 0x80 ? 1 : 0
}

interface CompiledInstruction {
  programIdIndex: number
  accountIndexes: number[]
  data: Uint8Array
}

interface ReadMessage {
  version: 'legacy' | 0
  required: number
  keys: string[]
  recentBlockhash: string
  instructions: CompiledInstruction[]
  lookupTables: number
}

/**
 * A legacy or v0 message, field by field: header, static keys, blockhash, instructions, then (v0)
 * address table lookups, every length minimal and every byte used.
 */
function readMessage(message: Uint8Array): ReadMessage {
  let at = 0
  const fail = (): never => {
    throw invalid('The Solana transaction cannot be decoded.')
  }
  const byte = () => (at < message.length ? message[at++]! : fail())
  const take = (n: number) => {
    if (at + n > message.length) fail()
    at += n
    return message.subarray(at - n, at)
  }
  const length = () => {
    const [value, size] = readShortVec(message.subarray(at))
    at += size
    return value
  }
  let version: 'legacy' | 0 = 'legacy'
  if (message[0] !== undefined && message[0] & 0x80) {
    const number = byte() & 0x7f
    if (number !== 0) throw invalid(`Unsupported Solana transaction version ${number}.`)
    version = 0
  }
  const required = byte()
  take(2) // read-only signed and unsigned counts: the runtime's business, not the guard's
  const keys = Array.from({ length: length() }, () => encodeBase58(take(32)))
  const recentBlockhash = encodeBase58(take(32))
  const instructions = Array.from({ length: length() }, () => ({
    programIdIndex: byte(),
    accountIndexes: Array.from({ length: length() }, byte),
    data: take(length()),
  }))
  let lookupTables = 0
  if (version === 0) {
    lookupTables = length()
    for (let i = 0; i < lookupTables; i++) {
      take(32)
      take(length())
      take(length())
    }
  }
  if (at !== message.length) throw invalid('The Solana transaction message is not canonically encoded.')
  return { version, required, keys, recentBlockhash, instructions, lookupTables }
}

/** Solana's compact-u16 at the start of `bytes`: its value and how many bytes it takes. */
function readShortVec(bytes: Uint8Array): [value: number, length: number] {
  let value = 0
  for (let i = 0; i < 3; i++) {
    const byte = bytes[i]
    if (byte === undefined) break
    value |= (byte & 0x7f) << (7 * i)
    if ((byte & 0x80) === 0) {
      // A longer encoding than needed (a trailing zero group) or one over u16 is not the canonical one.
      if ((i > 0 && byte === 0) || value > 0xffff)
        throw invalid('The Solana transaction message is not canonically encoded.')
      return [value, i + 1]
    }
  }
  throw invalid('The Solana transaction cannot be decoded.')
}

export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false
  return true
}

function invalid(message: string, cause?: unknown): PayError<'invalid_action'> {
  return new PayError({ code: 'invalid_action', message, ...(cause === undefined ? {} : { cause }) })
}
