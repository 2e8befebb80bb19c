import { type Address, createPublicClient, custom, type Hash, type Hex, toHex } from 'viem'
import { waitForTransactionReceipt } from 'viem/actions'
import { rejected } from '../../protocol/evm/errors.js'
import {
  defaultPollingInterval,
  defaultReceiptTimeoutMs,
  type EvmAccountRef,
  type EvmBackend,
  type ReceiptOptions,
} from './backend.js'

/** Any EIP-1193 provider: an injected wallet, a WalletConnect provider, a hardware-wallet bridge. */
export interface Eip1193Provider {
  request(args: { method: string; params?: readonly unknown[] | object }): Promise<unknown>
}

/**
 * Forwards to an EIP-1193 provider in the provider's own vocabulary: typed data always as
 * `eth_signTypedData_v4` (wallets read the unversioned method as legacy v1, and v4 signs v3 data
 * identically), messages as hex `personal_sign`. Before a transaction or typed data it makes the
 * wallet switch to the action's chain, so nothing is sent on whatever chain the wallet happens to show.
 */
export function eip1193Backend(
  provider: Eip1193Provider,
  accounts: readonly EvmAccountRef[],
  options: ReceiptOptions = {},
): EvmBackend {
  // retryCount 0: a wallet prompt must never be shown twice because viem retried a request.
  const reader = createPublicClient({
    transport: custom(provider, { retryCount: 0 }),
    pollingInterval: options.pollingInterval ?? defaultPollingInterval,
  })

  async function ensureChain(chainId: number): Promise<void> {
    if (Number(await provider.request({ method: 'eth_chainId' })) === chainId) return
    await provider.request({ method: 'wallet_switchEthereumChain', params: [{ chainId: toHex(chainId) }] })
    const current = Number(await provider.request({ method: 'eth_chainId' }))
    if (current !== chainId)
      throw rejected('The wallet did not switch to the action chain.', { chainId, current })
  }

  return {
    accounts,
    async signTypedData(chainId, address, typedData) {
      await ensureChain(chainId)
      const json = JSON.stringify(typedData, (_, v) => (typeof v === 'bigint' ? v.toString() : v))
      return (await provider.request({ method: 'eth_signTypedData_v4', params: [address, json] })) as Hex
    },
    async signMessage(_chainId, address: Address, message) {
      return (await provider.request({ method: 'personal_sign', params: [message, address] })) as Hex
    },
    async sendTransaction(chainId, { from, to, data, value }) {
      await ensureChain(chainId)
      // Built field by field: nothing the guard did not decode reaches the wallet, and the wallet
      // chooses gas, fees and nonce itself.
      const tx = { from, ...(to && { to }), ...(data && { data }), ...(value && { value }) }
      return (await provider.request({ method: 'eth_sendTransaction', params: [tx] })) as Hash
    },
    async waitForReceipt(_chainId, hash) {
      const receipt = await waitForTransactionReceipt(reader, {
        hash,
        timeout: options.receiptTimeoutMs ?? defaultReceiptTimeoutMs,
      })
      return receipt.status
    },
    // Reads go to whatever chain the wallet shows; one on another chain proves nothing (answers live).
    node: (chainId) => ({
      async request(args) {
        const current = Number(await provider.request({ method: 'eth_chainId' }))
        if (current !== chainId) throw rejected('The wallet is on another chain.', { chainId, current })
        return provider.request(args as { method: string; params?: readonly unknown[] })
      },
    }),
  }
}
