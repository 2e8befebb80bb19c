import {
  type Account,
  type Chain,
  createWalletClient,
  defineChain,
  http,
  type SendTransactionParameters,
  type Transport,
  type WalletClient,
} from 'viem'
import { waitForTransactionReceipt } from 'viem/actions'
import { eip155ChainId, type RpcTransaction } from '../../protocol/evm/index.js'
import { PayError } from '../../src/errors/PayError.js'
import {
  defaultPollingInterval,
  defaultReceiptTimeoutMs,
  type EvmBackend,
  type ReceiptOptions,
} from './backend.js'
import type { EvmNode } from './signatureStatus.js'

type BoundClient = WalletClient<Transport, Chain, Account>

/** Builds one WalletClient per configured chain around a viem account (usually a LocalAccount). */
export function clientsForAccount(
  account: Account,
  chains: Readonly<Record<string, { rpcUrl: string } | { transport: Transport }>>,
): BoundClient[] {
  return Object.entries(chains).map(([caip2, config]) => {
    const transport = 'transport' in config ? config.transport : http(config.rpcUrl)
    return createWalletClient({ account, chain: minimalChain(eip155ChainId(caip2)), transport })
  })
}

// viem needs a Chain to sign (chain id) and to send (mismatch check); name and currency are only labels.
function minimalChain(id: number): Chain {
  return defineChain({
    id,
    name: `eip155:${id}`,
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [] } },
  })
}

/** Signs and sends through viem WalletClients, each bound to one account on one chain. */
export function viemBackend(clients: readonly WalletClient[], options: ReceiptOptions = {}): EvmBackend {
  // Keyed by chain and address: several WalletClients may serve one chain with different accounts.
  const byKey = new Map<string, BoundClient>()
  const key = (chainId: number, address: string) => `${chainId}:${address.toLowerCase()}`
  for (const client of clients) {
    if (!client.account || !client.chain) {
      throw new PayError({
        code: 'missing_signer',
        message: 'A WalletClient given to evmSigner needs an account and a chain.',
        context: { hasAccount: !!client.account, hasChain: !!client.chain },
      })
    }
    byKey.set(key(client.chain.id, client.account.address), client as BoundClient)
  }
  const clientFor = (chainId: number, address: string) => byKey.get(key(chainId, address))!
  const anyClientOn = (chainId: number) => [...byKey.values()].find((c) => c.chain.id === chainId)!

  return {
    accounts: [...byKey.values()].map((c) => ({ chainId: c.chain.id, address: c.account.address })),
    signTypedData: (chainId, address, { types: { EIP712Domain: _derived, ...types }, ...typedData }) =>
      // viem derives EIP712Domain from the domain itself and accepts decimal strings for uints.
      clientFor(chainId, address).signTypedData({ ...typedData, types } as Parameters<
        BoundClient['signTypedData']
      >[0]),
    signMessage: (chainId, address, message) =>
      clientFor(chainId, address).signMessage({ message: { raw: message } }),
    sendTransaction: (chainId, tx) => {
      const client = clientFor(chainId, tx.from)
      return client.sendTransaction({
        ...fromRpcTransaction(tx),
        chain: client.chain,
      } as SendTransactionParameters)
    },
    waitForReceipt: async (chainId, hash) => {
      const receipt = await waitForTransactionReceipt(anyClientOn(chainId), {
        hash,
        pollingInterval: options.pollingInterval ?? defaultPollingInterval,
        timeout: options.receiptTimeoutMs ?? defaultReceiptTimeoutMs,
      })
      return receipt.status
    },
    // The client's transport is the wallet's node; viem types a WalletClient's requests narrowly.
    node: (chainId) => anyClientOn(chainId) as unknown as EvmNode,
  }
}

/**
 * The decoded fields in viem's shape. Gas, fees and nonce are absent on purpose: viem fills them from
 * the wallet's own node, never from the gateway.
 */
function fromRpcTransaction(tx: RpcTransaction) {
  return {
    ...(tx.to ? { to: tx.to } : {}),
    ...(tx.data ? { data: tx.data } : {}),
    ...(tx.value ? { value: BigInt(tx.value) } : {}),
  }
}
