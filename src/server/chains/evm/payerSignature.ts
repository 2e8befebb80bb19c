import {
  type Address,
  BaseError,
  ContractFunctionRevertedError,
  concat,
  getAddress,
  type Hex,
  isErc6492Signature,
  pad,
  parseErc6492Signature,
  size,
  slice as sliceHex,
  toHex,
  zeroAddress,
} from 'viem'
import { erc1271Abi } from './abi.js'
import type { EvmChain } from './chain.js'
import { recoverSigner } from './recovery.js'
import { same } from './transfers.js'

/** ERC-1271's answer for a valid signature. */
const erc1271Magic = '0x1626ba7e'

/**
 * What a payer's signature is, decided by its form and by the payer's code on the chain now:
 * - `key`: no code at the payer: an EOA's ECDSA signature;
 * - `contract`: code at the payer (a contract account, or an EIP-7702 delegation `0xef0100…`): the
 *   account's ERC-1271 answer decides, never ECDSA;
 * - `undeployed`: an ERC-6492 wrapper for an account not deployed yet: the factory call deploys it, then
 *   the inner signature is the account's ERC-1271 signature.
 * `signature` is what the token is handed (the inner signature once a 6492 wrapper is unwrapped).
 */
export type PayerSignature =
  | { kind: 'key'; signature: Hex }
  | { kind: 'contract'; signature: Hex }
  | { kind: 'undeployed'; signature: Hex; factory: Address; factoryData: Hex }

export async function classifyPayerSignature(
  chain: EvmChain,
  payer: Address,
  signature: Hex,
): Promise<PayerSignature> {
  return classifyByCode(await chain.publicClient.getCode({ address: payer }), signature)
}

/** classifyPayerSignature from the payer's code as read already (one read serves the confirm's checks). */
export function classifyByCode(code: Hex | undefined, signature: Hex): PayerSignature {
  const deployed = code !== undefined && code !== '0x'
  if (!isErc6492Signature(signature)) return { kind: deployed ? 'contract' : 'key', signature }
  const { address, data, signature: inner } = parseErc6492Signature(signature)
  // A wrapper for an account that exists by now (deployed by an earlier payment, or by its owner): the
  // deployment step is moot, the inner signature is checked as the account's own.
  if (deployed || !address || !data) return { kind: 'contract', signature: inner }
  return { kind: 'undeployed', signature: inner, factory: address, factoryData: data }
}

/** Why a payer's signature does not stand (a refusal, never an RPC failure, which is thrown). */
export type SignatureVerdict = { valid: true } | { valid: false; reason: string }

/**
 * Whether `signature` is `payer`'s signature of `hash` on this chain, by what the payer is (see
 * PayerSignature). An undeployed account's factory must be on the chain's `eip6492Factories`; its
 * deployment and the account's ERC-1271 answer are simulated together (one `eth_simulateV1`), so nothing
 * is deployed to find out.
 */
export async function verifyPayerSignature(
  chain: EvmChain,
  payer: Address,
  hash: Hex,
  signed: PayerSignature,
  /** A key's signature recovered by the node (recoverOnNode), not here: a FastPath (fastPath.ts). */
  options: { keyOnNode?: boolean } = {},
): Promise<SignatureVerdict> {
  switch (signed.kind) {
    case 'key':
      return options.keyOnNode
        ? verifyKeySignatureOnNode(chain, payer, hash, signed.signature)
        : verifyKeySignature(payer, hash, signed.signature)
    case 'contract':
      return verifyContractSignature(chain, payer, hash, signed.signature)
    case 'undeployed': {
      const refused = factoryRefusal(chain, signed.factory)
      if (refused) return refused
      const { results } = await chain.publicClient.simulateCalls({
        account: chain.executor.address,
        calls: [
          { to: signed.factory, data: signed.factoryData },
          {
            to: payer,
            abi: erc1271Abi,
            functionName: 'isValidSignature',
            args: [hash, signed.signature],
          },
        ],
      })
      const [deployment, answer] = results
      if (deployment?.status !== 'success')
        return { valid: false, reason: `the factory ${signed.factory} call reverted` }
      if (answer?.status !== 'success')
        return {
          valid: false,
          reason: 'the account deployed by its factory refused the signature (reverted)',
        }
      return answer.result === erc1271Magic
        ? { valid: true }
        : {
            valid: false,
            reason: `the account deployed by its factory answered ${answer.result}, not ERC-1271's ${erc1271Magic}`,
          }
    }
  }
}

/** A factory outside the chain's allow-list is refused before anything is simulated or sent. */
export function factoryRefusal(chain: EvmChain, factory: Address): SignatureVerdict | undefined {
  if (chain.eip6492Factories.some((allowed) => same(allowed, factory))) return undefined
  return {
    valid: false,
    reason: `its ERC-6492 factory ${factory} is not in chains.${chain.caip2}.eip6492Factories`,
  }
}

/** ECDSA: the key of an address without code. */
export async function verifyKeySignature(
  payer: Address,
  hash: Hex,
  signature: Hex,
): Promise<SignatureVerdict> {
  if (size(signature) !== 65)
    return { valid: false, reason: `a key's signature is 65 bytes, this one is ${size(signature)}` }
  try {
    const signer = await recoverSigner(hash, signature)
    if (same(signer, payer)) return { valid: true }
    return { valid: false, reason: `it was signed by ${signer}` }
  } catch {
    // A malformed signature (bad v, s out of range) is just not a signature of this message.
    return { valid: false, reason: 'it is not a valid ECDSA signature' }
  }
}

/** The ecrecover precompile: (hash, v, r, s) in, the signer's address (left-padded) or nothing out. */
const ecrecover = '0x0000000000000000000000000000000000000001'

/**
 * verifyKeySignature, with the recovery run by the node (the ecrecover precompile, by `eth_call`, in the
 * JSON-RPC batch of the turn): natively there, where a recovery in JavaScript costs this process about
 * 1.3-2.3 ms of CPU. The node is trusted with nothing new: the relay's simulation, the token's own
 * ecrecover and the receipt that decides the payment are its answers too, as is a contract payer's
 * ERC-1271 verdict. The same verdicts as verifyKeySignature: v as 0/1 or 27/28, r and s in range, else
 * "not a valid ECDSA signature" (the precompile answers nothing for those).
 */
export async function verifyKeySignatureOnNode(
  chain: EvmChain,
  payer: Address,
  hash: Hex,
  signature: Hex,
): Promise<SignatureVerdict> {
  if (size(signature) !== 65)
    return { valid: false, reason: `a key's signature is 65 bytes, this one is ${size(signature)}` }
  const notValid = { valid: false as const, reason: 'it is not a valid ECDSA signature' }
  const v = Number.parseInt(signature.slice(130, 132), 16)
  const yParity = v === 0 || v === 1 ? v : v === 27 || v === 28 ? v - 27 : undefined
  if (yParity === undefined) return notValid
  const { data } = await chain.publicClient.call({
    to: ecrecover,
    data: concat([hash, pad(toHex(27 + yParity)), sliceHex(signature, 0, 32), sliceHex(signature, 32, 64)]),
  })
  if (data === undefined || size(data) !== 32) return notValid
  const signer = getAddress(sliceHex(data, 12))
  if (signer === zeroAddress) return notValid
  if (same(signer, payer)) return { valid: true }
  return { valid: false, reason: `it was signed by ${signer}` }
}

async function verifyContractSignature(
  chain: EvmChain,
  payer: Address,
  hash: Hex,
  signature: Hex,
): Promise<SignatureVerdict> {
  try {
    const answer = await chain.publicClient.readContract({
      address: payer,
      abi: erc1271Abi,
      functionName: 'isValidSignature',
      args: [hash, signature],
    })
    return answer === erc1271Magic
      ? { valid: true }
      : { valid: false, reason: `the account answered ${answer}, not ERC-1271's ${erc1271Magic}` }
  } catch (error) {
    // The account's own refusal (a revert, or no answer at all: a contract without ERC-1271) is a verdict;
    // anything else (RPC down) is not, and is thrown.
    if (isRefusal(error))
      return { valid: false, reason: 'the account refused the signature (ERC-1271 call reverted)' }
    throw error
  }
}

function isRefusal(error: unknown): boolean {
  if (!(error instanceof BaseError)) return false
  return (
    error.walk((e) => e instanceof ContractFunctionRevertedError) !== null ||
    error.walk((e) => (e as { name?: string }).name === 'ContractFunctionZeroDataError') !== null ||
    error.walk((e) => (e as { name?: string }).name === 'AbiDecodingZeroDataError') !== null
  )
}
