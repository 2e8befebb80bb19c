import {
  type Address,
  type Chain,
  createPublicClient,
  createWalletClient,
  encodeFunctionData,
  erc20Abi,
  type Hex,
  http,
  type PublicClient,
  parseEventLogs,
  parseSignature,
  toHex,
  verifyMessage,
  verifyTypedData,
} from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { testUsdcAbi } from '../../fixtures/token/index.js'
import { isPayError } from '../../src/errors/PayError.js'
import {
  type AnvilInstance,
  anvilChain,
  anvilControl,
  anvilPrivateKeys,
  authorizationTypedData,
  deployTestToken,
  mintTestToken,
  startAnvil,
} from '../../test/anvil.js'
import { countingAccount } from '../../test/countingAccount.js'
import { expectPayError } from '../../test/expectPayError.js'
import { evmSigner } from './index.js'

const payerKey = anvilPrivateKeys[1]
const payee = privateKeyToAccount(anvilPrivateKeys[2])
const relayer = privateKeyToAccount(anvilPrivateKeys[3])

let anvil: AnvilInstance
let token: Address
let reader: PublicClient
let chain: Chain

beforeAll(async () => {
  anvil = await startAnvil()
  token = await deployTestToken(anvil.rpcUrl)
  await mintTestToken(anvil.rpcUrl, token, privateKeyToAccount(payerKey).address, 100_000_000n)
  chain = anvilChain(anvil.chainId, anvil.rpcUrl)
  reader = createPublicClient({ chain, transport: http(anvil.rpcUrl) })
})
afterAll(() => anvil?.stop())

function payerSigner() {
  const { account, calls: signatures } = countingAccount(payerKey)
  const signer = evmSigner({
    account,
    chains: { [anvil.caip2]: { rpcUrl: anvil.rpcUrl } },
    pollingInterval: 50,
  })
  return { signer, account, signatures }
}

const balanceOf = (owner: Address) =>
  reader.readContract({ address: token, abi: testUsdcAbi, functionName: 'balanceOf', args: [owner] })

describe('evmSigner with a local account', () => {
  it('advertises its address on every configured chain', () => {
    const account = privateKeyToAccount(payerKey)
    const signer = evmSigner({
      account,
      chains: { [anvil.caip2]: { rpcUrl: anvil.rpcUrl }, 'eip155:8453': { transport: http(anvil.rpcUrl) } },
    })
    expect(signer.namespace).toBe('eip155')
    expect(signer.methods).toEqual([
      'eth_sendTransaction',
      'eth_signTypedData_v4',
      'eth_signTypedData_v3',
      'eth_signTypedData',
      'personal_sign',
    ])
    expect(signer.accounts()).toEqual([`${anvil.caip2}:${account.address}`, `eip155:8453:${account.address}`])
  })

  it('signs an EIP-3009 authorization that the payee redeems on-chain for the exact amount', async () => {
    const { signer, account } = payerSigner()
    const typedData = authorizationTypedData({
      token,
      chainId: anvil.chainId,
      from: account.address,
      to: payee.address,
      value: 1_250_000n,
      kind: 'ReceiveWithAuthorization',
    })
    const signature = (await signer.request({
      chainId: anvil.caip2,
      method: 'eth_signTypedData_v4',
      params: [account.address, JSON.stringify(typedData)],
    })) as Hex
    const verify = { ...typedData, address: account.address, signature } as Parameters<
      typeof verifyTypedData
    >[0]
    expect(await verifyTypedData(verify)).toBe(true)

    const before = [await balanceOf(account.address), await balanceOf(payee.address)]
    const m = typedData.message
    const payeeWallet = createWalletClient({
      account: payee,
      chain,
      transport: http(anvil.rpcUrl),
    })
    const hash = await payeeWallet.writeContract({
      address: token,
      abi: testUsdcAbi,
      functionName: 'receiveWithAuthorization',
      args: [m.from, m.to, BigInt(m.value), BigInt(m.validAfter), BigInt(m.validBefore), m.nonce, signature],
    })
    expect((await reader.waitForTransactionReceipt({ hash })).status).toBe('success')
    expect(await balanceOf(account.address)).toBe(before[0]! - 1_250_000n)
    expect(await balanceOf(payee.address)).toBe(before[1]! + 1_250_000n)
    expect(
      await reader.readContract({
        address: token,
        abi: testUsdcAbi,
        functionName: 'authorizationState',
        args: [account.address, m.nonce],
      }),
    ).toBe(true)
  })

  it('signs a TransferWithAuthorization a relayer submits in the (v, r, s) form', async () => {
    const { signer, account } = payerSigner()
    const typedData = authorizationTypedData({
      token,
      chainId: anvil.chainId,
      from: account.address,
      to: payee.address,
      value: 500_000n,
    })
    const signature = (await signer.request({
      chainId: anvil.caip2,
      method: 'eth_signTypedData_v4',
      params: [account.address, JSON.stringify(typedData)],
    })) as Hex
    const { v, r, s } = parseSignature(signature)
    const before = await balanceOf(payee.address)
    const m = typedData.message
    const relayerWallet = createWalletClient({ account: relayer, chain, transport: http(anvil.rpcUrl) })
    const hash = await relayerWallet.writeContract({
      address: token,
      abi: testUsdcAbi,
      functionName: 'transferWithAuthorization',
      args: [
        m.from,
        m.to,
        BigInt(m.value),
        BigInt(m.validAfter),
        BigInt(m.validBefore),
        m.nonce,
        Number(v),
        r,
        s,
      ],
    })
    expect((await reader.waitForTransactionReceipt({ hash })).status).toBe('success')
    expect(await balanceOf(payee.address)).toBe(before + 500_000n)
  })

  it('accepts v3 and unversioned typed data as objects and signs them like v4', async () => {
    const { signer, account } = payerSigner()
    const typedData = authorizationTypedData({
      token,
      chainId: anvil.chainId,
      from: account.address,
      to: payee.address,
      value: 1n,
    })
    const sign = (method: string, params: unknown[]) =>
      signer.request({ chainId: anvil.caip2, method, params })
    const v4 = await sign('eth_signTypedData_v4', [account.address, JSON.stringify(typedData)])
    expect(await sign('eth_signTypedData_v3', [account.address, typedData])).toBe(v4)
    expect(await sign('eth_signTypedData', [account.address, JSON.stringify(typedData)])).toBe(v4)
    // Some dapps put the address second for the unversioned method.
    expect(await sign('eth_signTypedData', [typedData, account.address])).toBe(v4)
  })

  it('sends an ERC-20 transfer and, with more actions to follow, returns once it is mined', async () => {
    const { signer, account } = payerSigner()
    const before = await balanceOf(payee.address)
    const data = encodeFunctionData({
      abi: erc20Abi,
      functionName: 'transfer',
      args: [payee.address, 2_000_000n],
    })
    const hash = (await signer.request({
      chainId: anvil.caip2,
      method: 'eth_sendTransaction',
      params: [{ from: account.address, to: token, data }],
      followedByMore: true,
    })) as Hex
    expect(hash).toMatch(/^0x[0-9a-f]{64}$/)
    const receipt = await reader.getTransactionReceipt({ hash })
    expect(receipt.status).toBe('success')
    const [transfer] = parseEventLogs({ abi: erc20Abi, logs: receipt.logs, eventName: 'Transfer' })
    expect(transfer?.args).toEqual({ from: account.address, to: payee.address, value: 2_000_000n })
    expect(await balanceOf(payee.address)).toBe(before + 2_000_000n)
  })

  it('reports a mined but reverted transaction with its hash', async () => {
    const { signer, account } = payerSigner()
    const balance = await balanceOf(account.address)
    const rpc = (method: string, params: unknown[] = []) =>
      reader.request({ method: method as never, params: params as never })
    const wallet = (key: Hex) =>
      createWalletClient({ account: privateKeyToAccount(key), chain, transport: http(anvil.rpcUrl) })
    // Gas is the wallet's to estimate, so the revert is staged on-chain: the signer's transfer passes
    // its estimate, then a higher-tipped transferFrom drains the balance first in the same block.
    const approval = await wallet(payerKey).writeContract({
      address: token,
      abi: erc20Abi,
      functionName: 'approve',
      args: [relayer.address, balance],
    })
    // Mined before automine goes off: the pending count below must be the signer's transfer alone.
    await reader.waitForTransactionReceipt({ hash: approval })
    await rpc('evm_setAutomine', [false])
    try {
      const sending = signer.request({
        chainId: anvil.caip2,
        method: 'eth_sendTransaction',
        params: [
          {
            from: account.address,
            to: token,
            data: encodeFunctionData({
              abi: erc20Abi,
              functionName: 'transfer',
              args: [payee.address, balance],
            }),
          },
        ],
        followedByMore: true,
      })
      while (Number(((await rpc('txpool_status')) as { pending: string }).pending) < 1) {
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
      await wallet(anvilPrivateKeys[3]).writeContract({
        address: token,
        abi: erc20Abi,
        functionName: 'transferFrom',
        args: [account.address, relayer.address, balance],
        gas: 100_000n,
        maxPriorityFeePerGas: 100_000_000_000n,
        maxFeePerGas: 200_000_000_000n,
      })
      await rpc('evm_mine')
      const error = await expectPayError(sending, 'action_rejected')
      expect(error.context.txHash).toMatch(/^0x[0-9a-f]{64}$/)
      const receipt = await reader.getTransactionReceipt({ hash: error.context.txHash as Hex })
      expect(receipt.status).toBe('reverted')
    } finally {
      await rpc('evm_setAutomine', [true])
      await mintTestToken(anvil.rpcUrl, token, account.address, balance)
    }
  })

  it('signs personal_sign messages given as hex or as text', async () => {
    const { signer, account } = payerSigner()
    for (const message of [toHex('caipay attestation'), 'caipay attestation']) {
      const signature = (await signer.request({
        chainId: anvil.caip2,
        method: 'personal_sign',
        params: [message, account.address],
      })) as Hex
      expect(
        await verifyMessage({ address: account.address, message: 'caipay attestation', signature }),
      ).toBe(true)
    }
  })

  it('refuses a foreign chain or address, or data for another chain, without signing anything', async () => {
    const { signer, account, signatures } = payerSigner()
    const typedData = authorizationTypedData({
      token,
      chainId: anvil.chainId,
      from: account.address,
      to: payee.address,
      value: 1n,
    })
    const v4 = (chainId: string, address: Address, data: object) =>
      signer.request({ chainId, method: 'eth_signTypedData_v4', params: [address, JSON.stringify(data)] })

    const foreignChain = await expectPayError(v4('eip155:1', account.address, typedData), 'action_rejected')
    expect(foreignChain.context).toMatchObject({ chainId: 1, domainChainId: anvil.chainId })
    const typedFromOwnChain = await expectPayError(
      v4('eip155:1', account.address, { ...typedData, domain: { ...typedData.domain, chainId: 1 } }),
      'action_rejected',
    )
    expect(typedFromOwnChain.context).toMatchObject({ chainId: 'eip155:1' })
    const foreignAddress = await expectPayError(v4(anvil.caip2, payee.address, typedData), 'action_rejected')
    expect(foreignAddress.context).toMatchObject({ signer: payee.address })
    const otherDomain = { ...typedData, domain: { ...typedData.domain, chainId: 1 } }
    const domainError = await expectPayError(v4(anvil.caip2, account.address, otherDomain), 'action_rejected')
    expect(domainError.context).toMatchObject({ chainId: anvil.chainId, domainChainId: 1 })
    await expectPayError(
      signer.request({
        chainId: anvil.caip2,
        method: 'personal_sign',
        params: [toHex('hi'), payee.address],
      }),
      'action_rejected',
    )
    await expectPayError(
      signer.request({
        chainId: anvil.caip2,
        method: 'eth_sendTransaction',
        params: [{ from: payee.address, to: payee.address, value: '0x1' }],
      }),
      'action_rejected',
    )
    await expectPayError(
      signer.request({
        chainId: anvil.caip2,
        method: 'eth_sendTransaction',
        params: [{ from: account.address, to: payee.address, value: '0x1', chainId: '0x1' }],
      }),
      'action_rejected',
    )
    expect(signatures()).toBe(0)
  })

  it('names unknown methods and malformed params', async () => {
    const { signer, account, signatures } = payerSigner()
    await expectPayError(
      signer.request({ chainId: anvil.caip2, method: 'eth_sign', params: [account.address, '0x00'] }),
      'unsupported_method',
    )
    await expectPayError(
      signer.request({
        chainId: anvil.caip2,
        method: 'eth_signTypedData_v4',
        params: [account.address, '{not json'],
      }),
      'invalid_action',
    )
    await expectPayError(
      signer.request({
        chainId: anvil.caip2,
        method: 'eth_sendTransaction',
        params: [{ to: account.address }],
      }),
      'invalid_action',
    )
    await expectPayError(
      signer.request({
        chainId: 'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp',
        method: 'personal_sign',
        params: [],
      }),
      'invalid_caip',
    )
    expect(signatures()).toBe(0)
  })

  it('stops at once when aborted before signing', async () => {
    const { signer, account, signatures } = payerSigner()
    const controller = new AbortController()
    controller.abort(new Error('user left'))
    const error = await expectPayError(
      signer.request({
        chainId: anvil.caip2,
        method: 'personal_sign',
        params: [toHex('hi'), account.address],
        signal: controller.signal,
      }),
      'aborted',
    )
    expect(error.cause).toEqual(new Error('user left'))
    expect(signatures()).toBe(0)
  })
})

describe('evmSigner on a node that does not mine', () => {
  let idle: AnvilInstance
  beforeAll(async () => {
    idle = await startAnvil({ args: ['--no-mining'] })
  })
  afterAll(() => idle?.stop())

  const send = (signal?: AbortSignal) => {
    const account = privateKeyToAccount(payerKey)
    const signer = evmSigner({
      account,
      chains: { [idle.caip2]: { rpcUrl: idle.rpcUrl } },
      pollingInterval: 20,
    })
    const params = [{ from: account.address, to: payee.address, value: toHex(1) }]
    return signer.request({
      chainId: idle.caip2,
      method: 'eth_sendTransaction',
      params,
      followedByMore: signal !== undefined,
      ...(signal ? { signal } : {}),
    })
  }

  it('returns the hash without waiting when no action follows', async () => {
    expect(await send()).toMatch(/^0x[0-9a-f]{64}$/)
  })

  it('aborts the wait for a receipt and still hands back the sent hash', async () => {
    const error = await expectPayError(send(AbortSignal.timeout(300)), 'aborted')
    expect(error.context.txHash).toMatch(/^0x[0-9a-f]{64}$/)
  })

  it('keeps its own transaction alive while it waits: one the node dropped is sent again, the same bytes, and mined once', async () => {
    const node = createPublicClient({ transport: http(idle.rpcUrl) })
    const pool = () => anvilControl(idle.rpcUrl).pending()
    const before = new Set(await pool())
    const sent = send(AbortSignal.timeout(20_000))
    const hash = await vi.waitFor(async () => {
      const ours = (await pool()).find((h) => !before.has(h))
      if (!ours) throw new Error('not in the pool yet')
      return ours
    })
    const raw = await node.request({
      method: 'eth_getRawTransactionByHash' as never,
      params: [hash] as never,
    })
    await node.request({ method: 'anvil_dropTransaction' as never, params: [hash] as never })
    // Back in the pool, byte for byte, without anybody but the signer sending it.
    await vi.waitFor(async () => expect(await pool()).toContain(hash), { timeout: 5_000 })
    expect(
      await node.request({ method: 'eth_getRawTransactionByHash' as never, params: [hash] as never }),
    ).toBe(raw)
    await anvilControl(idle.rpcUrl).mine()
    expect(await sent).toBe(hash)
    expect((await node.getTransactionReceipt({ hash })).status).toBe('success')
  })

  it('stops keeping it alive once the flow stops waiting: a transaction dropped after the abort stays dropped', async () => {
    const node = createPublicClient({ transport: http(idle.rpcUrl) })
    const pool = () => anvilControl(idle.rpcUrl).pending()
    const before = new Set(await pool())
    const controller = new AbortController()
    const sent = send(controller.signal).catch((e) => e)
    const hash = await vi.waitFor(async () => {
      const ours = (await pool()).find((h) => !before.has(h))
      if (!ours) throw new Error('not in the pool yet')
      return ours
    })
    controller.abort()
    expect(isPayError(await sent, 'aborted')).toBe(true)
    await node.request({ method: 'anvil_dropTransaction' as never, params: [hash] as never })
    // Ten polling intervals: the signer resent a dropped transaction within one before the abort.
    await new Promise((resolve) => setTimeout(resolve, 200))
    expect(await pool()).not.toContain(hash)
  })
})

describe('evmSigner with a WalletClient', () => {
  it('signs with a WalletClient that holds a local account', async () => {
    const account = privateKeyToAccount(payerKey)
    const walletClient = createWalletClient({ account, chain, transport: http(anvil.rpcUrl) })
    const signer = evmSigner({ walletClient })
    expect(signer.accounts()).toEqual([`${anvil.caip2}:${account.address}`])
    const signature = (await signer.request({
      chainId: anvil.caip2,
      method: 'personal_sign',
      params: [toHex('hello'), account.address],
    })) as Hex
    expect(await verifyMessage({ address: account.address, message: 'hello', signature })).toBe(true)
  })

  it('sends through a JSON-RPC account (the node signs, as an injected wallet would)', async () => {
    // Anvil keeps its dev accounts unlocked, so it is a real JSON-RPC wallet for account 4.
    const address = privateKeyToAccount(anvilPrivateKeys[4]).address
    const walletClient = createWalletClient({ account: address, chain, transport: http(anvil.rpcUrl) })
    const signer = evmSigner({ walletClient: [walletClient], pollingInterval: 50 })
    const hash = (await signer.request({
      chainId: anvil.caip2,
      method: 'eth_sendTransaction',
      params: [{ from: address.toLowerCase(), to: payee.address, value: toHex(12345) }],
      followedByMore: true,
    })) as Hex
    const tx = await reader.getTransaction({ hash })
    expect([tx.from, tx.to, tx.value]).toEqual([address.toLowerCase(), payee.address.toLowerCase(), 12345n])
  })

  it('needs an account and a chain on every WalletClient', () => {
    const walletClient = createWalletClient({ transport: http(anvil.rpcUrl) })
    expect(() => evmSigner({ walletClient })).toThrow(expect.objectContaining({ code: 'missing_signer' }))
  })
})
