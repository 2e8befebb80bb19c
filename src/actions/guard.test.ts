import { describe, expect, it } from 'vitest'
import {
  amount,
  evmAccount,
  evmAddress,
  evmSigner,
  option,
  rpc,
  solAccount,
  solanaSigner,
  solChain,
  usdcBase,
  usdcSol,
} from '../flow/testkit.js'
import { type GuardContext, guardActions } from './guard.js'
import { createSignerRegistry } from './registry.js'
import { routeActions } from './route.js'
import type { ActionInspection, Signer } from './types.js'

const usdc = option().amount // 1 USDC on Base, caip19 unit
const accounts = [evmAccount, solAccount]

function inspecting(inspection: Partial<ActionInspection> = {}): Signer {
  return evmSigner({ inspect: () => ({ account: evmAccount, transfers: [], ...inspection }) })
}

function check(
  signers: Signer[],
  actions = [rpc('eip155:8453', 'eth_sendTransaction')],
  ctx: Omit<GuardContext, 'account'> & { account?: string } = { accounts, amount: usdc },
) {
  // Resolves with what the guard counted: the total the review shows.
  return guardActions(routeActions(createSignerRegistry(signers), actions), {
    account: evmAccount,
    ...ctx,
  }).then((approved) => approved.total)
}

const rejected = (context: Record<string, unknown> = {}) =>
  expect.objectContaining({ code: 'action_rejected', context: expect.objectContaining(context) })

describe('guardActions', () => {
  it('counts an approval of Permit2 and the transfer Permit2 pulls out of it once; a plain transfer there in full', async () => {
    const permit2 = 'eip155:8453:0x000000000022D473030F116dDEE9F6B43aC78BA3'
    const payee = 'eip155:8453:0x2222222222222222222222222222222222222222'
    const approve = { asset: usdcBase, amount: 1_000_000n, to: permit2, approval: true as const }
    const pull = { asset: usdcBase, amount: 1_000_000n, to: payee, through: permit2.toLowerCase() }
    const actions = [rpc('eip155:8453', 'eth_sendTransaction'), rpc('eip155:8453', 'eth_signTypedData_v4')]
    const signer = (transfers: ActionInspection['transfers'][]) => {
      let call = 0
      return evmSigner({ inspect: () => ({ account: evmAccount, transfers: transfers[call++ % 2]! }) })
    }
    await expect(check([signer([[approve], [pull]])], actions)).resolves.toBe(1_000_000n)
    // More pulled than approved: the rest counts.
    const more = { ...pull, amount: 1_000_001n }
    await expect(check([signer([[approve], [more]])], actions)).rejects.toThrowError(
      rejected({ total: '1000001' }),
    )
    // A transfer to Permit2 is no allowance: both count.
    const { approval: _, ...sent } = approve
    await expect(check([signer([[sent], [pull]])], actions)).rejects.toThrowError(
      rejected({ total: '2000000' }),
    )
  })

  it('accepts transfers in the option asset up to its amount; EVM hex compared case-insensitively', async () => {
    const signer = inspecting({ transfers: [{ asset: usdcBase.toLowerCase(), amount: 1_000_000n }] })
    await expect(check([signer])).resolves.toBe(1_000_000n)
  })

  it('accepts an attestation that moves nothing', async () => {
    await expect(check([inspecting()], [rpc('eip155:8453', 'personal_sign')])).resolves.toBe(0n)
  })

  it('rejects an action on another chain than the option account’s', async () => {
    await expect(check([inspecting()], [rpc('eip155:1', 'eth_sendTransaction')])).rejects.toThrowError(
      rejected({ chainId: 'eip155:1', optionAccount: evmAccount }),
    )
  })

  it('binds the option’s account: another advertised account on the same chain never signs for it (cause 2)', async () => {
    const other = 'eip155:8453:0x3333333333333333333333333333333333333333'
    const ctx = { accounts: [...accounts, other], amount: usdc, account: evmAccount }
    await expect(check([inspecting({ account: other })], undefined, ctx)).rejects.toThrowError(
      rejected({ account: other, optionAccount: evmAccount }),
    )
    // The same account in another spelling is the same account.
    const spelled = { ...ctx, account: evmAccount.toLowerCase() }
    await expect(check([inspecting()], undefined, spelled)).resolves.toBe(0n)
  })

  it('lets a mixed-chain option’s other chain only attest, by the wallet’s one account there', async () => {
    const ctx = { accounts, amount: amount(`caip19/${usdcSol}`, '5'), account: solAccount }
    await expect(check([inspecting()], undefined, ctx)).resolves.toBe(0n)
    const moving = inspecting({ transfers: [{ asset: usdcBase, amount: 1n }] })
    await expect(check([moving], undefined, ctx)).rejects.toThrowError(
      rejected({ optionAccount: solAccount }),
    )
    const second = 'eip155:8453:0x3333333333333333333333333333333333333333'
    await expect(
      check([inspecting()], undefined, { ...ctx, accounts: [...accounts, second] }),
    ).rejects.toThrowError(rejected({ optionAccount: solAccount }))
  })

  it('refuses an option whose account the wallet did not advertise, even if the signer holds it', async () => {
    const other = 'eip155:8453:0x3333333333333333333333333333333333333333'
    const ctx = { accounts, amount: usdc, account: other }
    await expect(check([inspecting({ account: other })], undefined, ctx)).rejects.toThrowError(
      rejected({ optionAccount: other }),
    )
  })

  it('refuses an action whose signer cannot decode it, whatever its chain', async () => {
    const blind = evmSigner({ inspect: false })
    await expect(check([blind], [rpc('eip155:10', 'eth_sendTransaction')])).rejects.toThrowError(
      rejected({ chainId: 'eip155:10' }),
    )
    await expect(check([blind])).rejects.toThrowError(rejected({ namespace: 'eip155' }))
  })

  it('refuses a transfer that states other decimals than the option shows', async () => {
    const transfer = { asset: usdcBase, amount: 1n }
    await expect(check([inspecting({ transfers: [{ ...transfer, decimals: 6 }] })])).resolves.toBe(1n)
    await expect(check([inspecting({ transfers: [{ ...transfer, decimals: 0 }] })])).rejects.toThrowError(
      rejected({ decimals: 0, shown: 6 }),
    )
  })

  it('counts what earlier rounds left valid against the same amount', async () => {
    const signer = inspecting({ transfers: [{ asset: usdcBase, amount: 600_000n }] })
    const ctx = (stillAuthorized: bigint) => ({ accounts, amount: usdc, stillAuthorized })
    await expect(check([signer], undefined, ctx(400_000n))).resolves.toBe(600_000n)
    await expect(check([signer], undefined, ctx(400_001n))).rejects.toThrowError(
      rejected({ stillAuthorized: '400001', limit: '1000000' }),
    )
  })

  it('rejects a signing account that was not advertised', async () => {
    const other = 'eip155:8453:0x3333333333333333333333333333333333333333'
    await expect(check([inspecting({ account: other })])).rejects.toThrowError(rejected({ account: other }))
  })

  it('rejects an advertised account on another chain than the action', async () => {
    const mainnet = `eip155:1:${evmAddress}`
    const ctx = { accounts: [...accounts, mainnet], amount: usdc }
    await expect(check([inspecting({ account: mainnet })], undefined, ctx)).rejects.toThrowError(rejected())
  })

  it('rejects a transfer of another asset', async () => {
    const dai = 'eip155:8453/erc20:0x50c5725949A6F0c72E6C4a641F24049A917DB0Cb'
    const signer = inspecting({ transfers: [{ asset: dai, amount: 1n }] })
    await expect(check([signer])).rejects.toThrowError(rejected({ asset: dai, expected: usdcBase }))
  })

  it('rejects any transfer when the option is priced in fiat', async () => {
    const signer = inspecting({ transfers: [{ asset: usdcBase, amount: 1n }] })
    const ctx = { accounts, amount: amount('iso4217/USD', '100') }
    await expect(check([signer], undefined, ctx)).rejects.toThrowError(rejected())
  })

  it('rejects more than the option amount, summed over all actions', async () => {
    const half = inspecting({ transfers: [{ asset: usdcBase, amount: 600_000n }] })
    const actions = [rpc('eip155:8453', 'eth_sendTransaction'), rpc('eip155:8453', 'eth_sendTransaction')]
    await expect(check([half], actions)).rejects.toThrowError(
      rejected({ total: '1200000', limit: '1000000' }),
    )
  })

  it('rejects a negative transfer', async () => {
    const signer = inspecting({ transfers: [{ asset: usdcBase, amount: -1n }] })
    await expect(check([signer])).rejects.toThrowError(rejected())
  })

  it('rejects an action the signer cannot decode', async () => {
    const signer = evmSigner({
      inspect: () => {
        throw new Error('unknown selector')
      },
    })
    await expect(check([signer])).rejects.toThrowError(rejected({ index: 0 }))
  })

  it('checks Solana transfers against a Solana option asset exactly', async () => {
    const sol = solanaSigner({
      inspect: () => ({ account: solAccount, transfers: [{ asset: usdcSol, amount: 5n }] }),
    })
    const ctx = { accounts, account: solAccount, amount: amount(`caip19/${usdcSol}`, '5') }
    const actions = [rpc(solChain, 'solana_signTransaction', [{ transaction: 'AA==' }])]
    await expect(check([sol], actions, ctx)).resolves.toBe(5n)
    const lower = solanaSigner({
      inspect: () => ({ account: solAccount, transfers: [{ asset: usdcSol.toLowerCase(), amount: 5n }] }),
    })
    await expect(check([lower], actions, ctx)).rejects.toThrowError(rejected())
  })
})
