import {
  type Address,
  createPublicClient,
  createWalletClient,
  encodeFunctionData,
  erc20Abi,
  type Hex,
  http,
  toHex,
  verifyMessage,
  verifyTypedData,
} from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  type AnvilInstance,
  anvilChain,
  anvilPrivateKeys,
  authorizationTypedData,
  deployTestToken,
  mintTestToken,
  startAnvil,
} from '../../test/anvil.js'
import { expectPayError } from '../../test/expectPayError.js'
import { type Eip1193Provider, evmSigner } from './index.js'

const key = anvilPrivateKeys[6]
const owner = privateKeyToAccount(key)
const payee = privateKeyToAccount(anvilPrivateKeys[7]).address

let home: AnvilInstance
let base: AnvilInstance
let token: Address

beforeAll(async () => {
  ;[home, base] = await Promise.all([startAnvil(), startAnvil({ chainId: 8453 })])
  token = await deployTestToken(home.rpcUrl)
  await mintTestToken(home.rpcUrl, token, owner.address, 50_000_000n)
})
afterAll(() => Promise.all([home?.stop(), base?.stop()]))

class ProviderRpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message)
  }
}

interface TinyWallet {
  provider: Eip1193Provider
  /** Methods the wallet received, in order. */
  calls: string[]
}

/**
 * A small but real EIP-1193 wallet: it holds one key, signs through viem, sends to the node of
 * its current chain and forwards reads there. `userConfirms` stands for the approval prompt.
 */
function tinyWallet(options: { startOn: AnvilInstance; userConfirms?: () => Promise<void> }): TinyWallet {
  const nodes = new Map([home, base].map((n) => [n.chainId, n]))
  let current = options.startOn
  const confirm = options.userConfirms ?? (() => Promise.resolve())
  const calls: string[] = []
  const request = async ({ method, params }: { method: string; params?: unknown }): Promise<unknown> => {
    calls.push(method)
    const [first, second] = (params ?? []) as [unknown, unknown]
    switch (method) {
      case 'eth_chainId':
        return toHex(current.chainId)
      case 'wallet_switchEthereumChain': {
        const next = nodes.get(Number((first as { chainId: Hex }).chainId))
        if (!next) throw new ProviderRpcError(4902, 'Unrecognized chain ID.')
        current = next
        return null
      }
      case 'eth_signTypedData_v4':
        await confirm()
        return owner.signTypedData(JSON.parse(second as string))
      case 'personal_sign':
        await confirm()
        return owner.signMessage({ message: { raw: first as Hex } })
      case 'eth_sendTransaction': {
        await confirm()
        const tx = first as { to: Address; data?: Hex; value?: Hex }
        const wallet = createWalletClient({
          account: owner,
          chain: anvilChain(current.chainId, current.rpcUrl),
          transport: http(current.rpcUrl),
        })
        return wallet.sendTransaction({
          to: tx.to,
          data: tx.data,
          value: tx.value ? BigInt(tx.value) : undefined,
        })
      }
      default:
        return createPublicClient({ transport: http(current.rpcUrl) }).request({ method, params } as never)
    }
  }
  return { provider: { request }, calls }
}

function signerFor(wallet: TinyWallet, chains: readonly AnvilInstance[] = [home, base]) {
  return evmSigner({
    provider: wallet.provider,
    accounts: chains.map((c) => `${c.caip2}:${owner.address}`),
    pollingInterval: 50,
  })
}

describe('evmSigner over an EIP-1193 provider', () => {
  it('advertises the accounts it was given', () => {
    const signer = signerFor(tinyWallet({ startOn: home }))
    expect(signer.accounts()).toEqual([`eip155:31337:${owner.address}`, `eip155:8453:${owner.address}`])
  })

  it('has the wallet sign EIP-3009 typed data, always as eth_signTypedData_v4', async () => {
    const wallet = tinyWallet({ startOn: home })
    const signer = signerFor(wallet)
    const typedData = authorizationTypedData({
      token,
      chainId: home.chainId,
      from: owner.address,
      to: payee,
      value: 7n,
    })
    const { EIP712Domain: _, ...types } = typedData.types
    // v3 as an object, without EIP712Domain, as some servers send it: the wallet still gets v4 JSON.
    const signature = (await signer.request({
      chainId: home.caip2,
      method: 'eth_signTypedData_v3',
      params: [owner.address, { ...typedData, types }],
    })) as Hex
    expect(wallet.calls).toEqual(['eth_chainId', 'eth_signTypedData_v4'])
    const verify = { ...typedData, address: owner.address, signature } as Parameters<
      typeof verifyTypedData
    >[0]
    expect(await verifyTypedData(verify)).toBe(true)
  })

  it('has the wallet sign a personal message', async () => {
    const signer = signerFor(tinyWallet({ startOn: home }))
    const signature = (await signer.request({
      chainId: home.caip2,
      method: 'personal_sign',
      params: ['pay with caipay', owner.address],
    })) as Hex
    expect(await verifyMessage({ address: owner.address, message: 'pay with caipay', signature })).toBe(true)
  })

  it('switches the wallet to the action chain, sends, and waits for the receipt through the provider', async () => {
    const wallet = tinyWallet({ startOn: base })
    const signer = signerFor(wallet)
    const data = encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [payee, 3_000_000n] })
    const hash = (await signer.request({
      chainId: home.caip2,
      method: 'eth_sendTransaction',
      params: [{ from: owner.address, to: token, data }],
      followedByMore: true,
    })) as Hex
    expect(wallet.calls.slice(0, 4)).toEqual([
      'eth_chainId',
      'wallet_switchEthereumChain',
      'eth_chainId',
      'eth_sendTransaction',
    ])
    expect(wallet.calls).toContain('eth_getTransactionReceipt')
    const receipt = await createPublicClient({ transport: http(home.rpcUrl) }).getTransactionReceipt({ hash })
    expect(receipt.status).toBe('success')
  })

  it('turns a declined prompt (4001) into user_rejected and keeps the wallet error', async () => {
    const declined = new ProviderRpcError(4001, 'User rejected the request.')
    const signer = signerFor(tinyWallet({ startOn: home, userConfirms: () => Promise.reject(declined) }))
    const error = await expectPayError(
      signer.request({ chainId: home.caip2, method: 'personal_sign', params: [toHex('x'), owner.address] }),
      'user_rejected',
    )
    expect(error.context).toMatchObject({ rpcCode: 4001, chainId: home.caip2, method: 'personal_sign' })
    expect(error.cause).toBe(declined)
  })

  it('keeps other wallet error codes, e.g. a chain the wallet does not know (4902)', async () => {
    const unknownChain = { caip2: 'eip155:10', chainId: 10 } as AnvilInstance
    const signer = signerFor(tinyWallet({ startOn: home }), [home, unknownChain])
    const typedData = authorizationTypedData({
      token,
      chainId: 10,
      from: owner.address,
      to: payee,
      value: 1n,
    })
    const error = await expectPayError(
      signer.request({
        chainId: 'eip155:10',
        method: 'eth_signTypedData_v4',
        params: [owner.address, JSON.stringify(typedData)],
      }),
      'action_rejected',
    )
    expect(error.context.rpcCode).toBe(4902)
  })

  it('stops waiting for a prompt the user leaves open when the signal aborts', async () => {
    const wallet = tinyWallet({ startOn: home, userConfirms: () => new Promise(() => {}) })
    const controller = new AbortController()
    const pending = signerFor(wallet).request({
      chainId: home.caip2,
      method: 'personal_sign',
      params: [toHex('x'), owner.address],
      signal: controller.signal,
    })
    setTimeout(() => controller.abort(), 20)
    await expectPayError(pending, 'aborted')
    expect(wallet.calls).toEqual(['personal_sign'])
  })
})
