import { splitSolanaTransaction } from '../../../protocol/solana/index.js'
import type { WalletRpcAction } from '../../contract/gateway.js'
import { paramsError } from '../errors.js'

/** Whole bytes of hex, at least one. */
const hexBytes = /^0x(?:[0-9a-fA-F]{2})+$/
/**
 * A smart account's signature is longer than an EOA's: an ABI-encoded ERC-1271 signature, a WebAuthn
 * assertion, an ERC-6492 wrapper carrying the account's deployment call. 16 KiB holds all of them.
 */
const maxSignatureBytes = 16 * 1024
const hash32 = /^0x[0-9a-fA-F]{64}$/
const base64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/

type FormCheck = (result: string) => string | undefined

const signatureForm: FormCheck = (r) => {
  if (!hexBytes.test(r)) return 'expected a 0x-prefixed hex signature'
  if ((r.length - 2) / 2 > maxSignatureBytes)
    return `expected a signature of at most ${maxSignatureBytes} bytes`
  return undefined
}

/** The result form each method implies (spec gateway rules 5 and 6). */
const forms: Record<string, FormCheck> = {
  eth_signTypedData_v4: signatureForm,
  eth_signTypedData_v3: signatureForm,
  eth_signTypedData: signatureForm,
  personal_sign: signatureForm,
  eth_sendTransaction: (r) =>
    hash32.test(r) ? undefined : 'expected a 32-byte 0x-prefixed transaction hash',
  solana_signTransaction: (r) => {
    // A detached signature is 64 bytes; the spec wants the whole signed transaction.
    if (r.length === 0 || !base64.test(r)) return 'expected a base64-encoded signed transaction'
    // Its layout only: the driver compares the message with what the service built, byte for byte.
    return splitSolanaTransaction(r)
      ? undefined
      : 'expected a base64-encoded signed transaction (it is not laid out as one)'
  },
}

/**
 * Results must answer the actions one to one, in order (spec rule 4), each in the form its method implies.
 * Throws `params_validation` naming the first mismatch.
 */
export function checkResults(actions: readonly WalletRpcAction[], results: readonly string[]): void {
  if (results.length !== actions.length) {
    throw paramsError(
      'results',
      `results has ${results.length} entries; the option has ${actions.length} actions (one result per action, in order)`,
    )
  }
  for (const [index, action] of actions.entries()) {
    const { method, chainId } = action.walletRpc
    const check = forms[method]
    const problem = check ? check(results[index]!) : `no result form is known for method ${method}`
    if (problem) {
      throw paramsError(`results.${index}`, `results[${index}] answers ${method} on ${chainId}: ${problem}`)
    }
  }
}
