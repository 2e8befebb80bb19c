import { describe, expect, it, vi } from 'vitest'
import { build, rpc, solChain } from '../flow/testkit.js'
import { resolveActions } from './resolve.js'

const attest = rpc('eip155:8453', 'personal_sign', ['0xabc', '0x1111111111111111111111111111111111111111'])
const solTx = rpc(solChain, 'solana_signTransaction', [{ transaction: 'AQID' }])

describe('resolveActions', () => {
  it('returns wallet actions as offered and does not fetch when there is no build', async () => {
    const fetch = vi.fn()
    await expect(resolveActions([attest], fetch)).resolves.toEqual([attest])
    expect(fetch).not.toHaveBeenCalled()
  })

  it("takes fetch's answer as the option's whole resolved list (row 21)", async () => {
    const fetch = vi.fn(async () => [attest, solTx])
    await expect(resolveActions([attest, build('bld_1')], fetch)).resolves.toEqual([attest, solTx])
    expect(fetch).toHaveBeenCalledExactlyOnceWith('bld_1')
  })

  it('accepts a build that expands into several actions', async () => {
    const second = rpc(solChain, 'solana_signTransaction', [{ transaction: 'BAUG' }])
    const fetch = async () => [solTx, second]
    await expect(resolveActions([build('bld_1')], fetch)).resolves.toEqual([solTx, second])
  })

  it("refuses an answer that drops one of the option's own actions (it would be skipped)", async () => {
    const fetch = async () => [solTx]
    await expect(resolveActions([attest, build('bld_1')], fetch)).rejects.toThrowError(
      expect.objectContaining({ code: 'invalid_action' }),
    )
  })

  it('compares actions field by field, whatever the key order after storage', async () => {
    const reordered = {
      walletRpc: { params: attest.walletRpc.params, method: 'personal_sign', chainId: 'eip155:8453' },
      type: 'walletRpc' as const,
    }
    await expect(resolveActions([attest, build('b')], async () => [reordered, solTx])).resolves.toHaveLength(
      2,
    )
  })

  it('refuses a non-wallet action in the answer, an unknown action type, and an empty result', async () => {
    const code = expect.objectContaining({ code: 'invalid_action' })
    await expect(resolveActions([build('b')], async () => [build('c') as never])).rejects.toThrowError(code)
    await expect(resolveActions([{ type: 'qr' } as never], async () => [])).rejects.toThrowError(code)
    await expect(resolveActions([build('b')], async () => [])).rejects.toThrowError(code)
    await expect(resolveActions([], async () => [])).rejects.toThrowError(code)
  })
})
