import {
  type Account,
  type Chain,
  createWalletClient,
  defineChain,
  type Hash,
  type Hex,
  http,
  type SendTransactionParameters,
  TransactionNotFoundError,
  type Transport,
  type WalletClient,
} from 'viem'
import { getTransaction, waitForTransactionReceipt } from 'viem/actions'
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
  const signed = recentlySigned()
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
    sendTransaction: async (chainId, tx) => {
      const client = clientFor(chainId, tx.from)
      const request = { ...fromRpcTransaction(tx), chain: client.chain } as SendTransactionParameters
      // A JSON-RPC account: the node signs and keeps the transaction; nothing here to send again.
      if (client.account.type !== 'local') return client.sendTransaction(request)
      const prepared = await client.prepareTransactionRequest(request)
      const raw = await client.signTransaction(prepared as Parameters<BoundClient['signTransaction']>[0])
      const hash = await client.sendRawTransaction({ serializedTransaction: raw })
      signed.remember(hash, raw)
      return hash
    },
    waitForReceipt: async (chainId, hash, signal) => {
      const client = anyClientOn(chainId)
      const pollingInterval = options.pollingInterval ?? defaultPollingInterval
      const stopKeeping = keepInPool(client, hash, signed.take(hash), pollingInterval)
      // The flow gave up on the receipt (cancelled): the transaction is left to the node from here.
      signal?.addEventListener('abort', stopKeeping, { once: true })
      try {
        const receipt = await waitForTransactionReceipt(client, {
          hash,
          pollingInterval,
          timeout: options.receiptTimeoutMs ?? defaultReceiptTimeoutMs,
        })
        return receipt.status
      } finally {
        stopKeeping()
        signal?.removeEventListener('abort', stopKeeping)
      }
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

/**
 * The signed bytes of the last few transactions sent, by hash, for `keepInPool`. Bounded: the last
 * action of a flow is never waited for, so its entry is only dropped by newer ones.
 */
function recentlySigned(limit = 16) {
  const raws = new Map<Hash, Hex>()
  return {
    remember(hash: Hash, raw: Hex) {
      raws.set(hash, raw)
      if (raws.size > limit) raws.delete(raws.keys().next().value!)
    },
    take(hash: Hash): Hex | undefined {
      const raw = raws.get(hash)
      raws.delete(hash)
      return raw
    },
  }
}

/**
 * While the wallet waits for its own transaction, sends the same signed bytes again whenever the node
 * no longer knows it: nodes drop pending transactions (a fee spike, a full pool, a reorg, a load
 * balancer's other backend), and a wallet that does not resend waits out its whole receipt timeout
 * for a transaction nobody will mine. Same bytes, same hash and nonce: it can land once at most.
 */
function keepInPool(client: BoundClient, hash: Hash, raw: Hex | undefined, intervalMs: number): () => void {
  if (raw === undefined) return () => {}
  let stopped = false
  const timer = setInterval(async () => {
    try {
      const dropped = await getTransaction(client, { hash }).then(
        () => false,
        (error) => error instanceof TransactionNotFoundError,
      )
      if (dropped && !stopped) await client.sendRawTransaction({ serializedTransaction: raw })
    } catch {
      // Refused ("nonce too low": mined or replaced; fees below the base fee for now): the receipt
      // wait decides, and the next tick tries again.
    }
  }, intervalMs)
  return () => {
    stopped = true
    clearInterval(timer)
  }
}
