import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { describe, expect, it } from 'vitest'
import { defaultConfig, loadConfig, resolveConfig } from './config.js'
import { poolSizeFor } from './server.js'

const chain = {
  rpcUrl: 'http://127.0.0.1:8545',
  signerKey: 'env:TEST_SIGNER',
  assets: {
    'eip155:31337/erc20:0x5FbDB2315678afecb367f032d93F642f64180aa3': {
      symbol: 'USDC',
      name: 'USD Coin',
      decimals: 6,
      usdRate: '1',
    },
  },
}

describe('config', () => {
  it('defaults: test mode only, 100/s burst 200, 24 h idempotency, 15 min payments', () => {
    expect(resolveConfig({})).toEqual(defaultConfig)
    expect(defaultConfig.rateLimit).toEqual({ perSecond: 100, burst: 200, failedAuthPerMinute: 60 })
    expect(defaultConfig.idempotencyTtlSeconds).toBe(86_400)
    expect(defaultConfig.paymentTtlSeconds).toBe(900)
  })

  it('resolves env: indirection and fills asset defaults', () => {
    const config = resolveConfig(
      { chains: { 'eip155:31337': chain }, publicBaseUrl: 'https://x.example/' },
      { TEST_SIGNER: '0xabc' },
    )
    expect(config.chains['eip155:31337']!.signerKey).toBe('0xabc')
    expect(config.publicBaseUrl).toBe('https://x.example')
    const asset = Object.values(config.chains['eip155:31337']!.assets)[0]!
    expect(asset.decimals).toBe(6)
  })

  it('names a missing environment variable', () => {
    expect(() => resolveConfig({ chains: { 'eip155:31337': chain } }, {})).toThrow(/TEST_SIGNER/)
  })

  it('rejects unknown keys and bad values with their path', () => {
    expect(() => resolveConfig({ colour: 'red' })).toThrow(/Invalid configuration/)
    expect(() => resolveConfig({ chains: { 'not a chain': chain } }, { TEST_SIGNER: 'x' })).toThrow(/chains/)
    expect(() => resolveConfig({ rateLimit: { perSecond: 0 } })).toThrow(/rateLimit/)
    expect(() => resolveConfig({ sanctioned: ['nope'] })).toThrow(/sanctioned/)
  })

  it('names each key it does not accept, and where (chains.<caip2>.<key>)', () => {
    const env = { TEST_SIGNER: 'x' }
    const message = (input: unknown) => {
      try {
        resolveConfig(input, env)
      } catch (error) {
        return (error as Error).message
      }
      throw new Error('accepted')
    }
    expect(message({ chains: { 'eip155:1': { ...chain, foo: 1, bar: 2 } } })).toBe(
      'Invalid configuration:\n  chains.eip155:1.foo: unknown key\n  chains.eip155:1.bar: unknown key',
    )
    expect(message({ chains: { 'eip155:1': { ...chain, eip6492Factories: ['0x12'] } } })).toMatch(
      /chains\.eip155:1\.eip6492Factories\.0: Expected a 0x-prefixed 20-byte address/,
    )
    const asset = 'eip155:1/erc20:0x0000000000000000000000000000000000000001'
    expect(
      message({
        chains: {
          'eip155:1': {
            ...chain,
            assets: { [asset]: { symbol: 'T', name: 'T', decimals: 6, transferMethod: 'permit' } },
          },
        },
      }),
    ).toMatch(
      new RegExp(
        `chains\\.eip155:1\\.assets\\.${asset}\\.transferMethod: expected one of "eip3009", "permit2"`,
      ),
    )
    expect(message({ rateLimit: { perSecond: 0 } })).toMatch(/rateLimit\.perSecond: must be at least 1/)
    const factories = ['0x0ba5ed0c6aa8c49038f819e587e2633c4a9f428a']
    expect(
      resolveConfig({ chains: { 'eip155:1': { ...chain, eip6492Factories: factories } } }, env).chains[
        'eip155:1'
      ]?.eip6492Factories,
    ).toEqual(factories)
  })

  it('push.underpaid: hold by default, refund when asked, anything else one line naming the key', () => {
    expect(defaultConfig.push.underpaid).toBe('hold')
    expect(resolveConfig({ push: { overpaid: 'refund' } }).push).toEqual({
      overpaid: 'refund',
      underpaid: 'hold',
      pollMs: 1000,
    })
    expect(resolveConfig({ push: { underpaid: 'refund' } }).push.underpaid).toBe('refund')
    expect(() => resolveConfig({ push: { underpaid: 'keep' } })).toThrow(
      new Error('Invalid configuration:\n  push.underpaid: expected one of "hold", "refund"'),
    )
  })

  it('a chain commitment is confirmed or finalized; processed is refused with its path', () => {
    const finalized = resolveConfig(
      { chains: { 'eip155:31337': { ...chain, commitment: 'finalized' } } },
      { TEST_SIGNER: 'x' },
    )
    expect(finalized.chains['eip155:31337']!.commitment).toBe('finalized')
    expect(() =>
      resolveConfig(
        { chains: { 'eip155:31337': { ...chain, commitment: 'processed' } } },
        { TEST_SIGNER: 'x' },
      ),
    ).toThrow(/commitment/)
  })

  it('the relayer: job slots (default 64) size the pool; a chain tunes head polling, its in-flight cap and RPC batches', () => {
    expect(defaultConfig.jobSlots).toBe(64)
    expect(resolveConfig({ jobs: { slots: 256 } }).jobSlots).toBe(256)
    expect(() => resolveConfig({ jobs: { slots: 0 } })).toThrow(/jobs\.slots/)
    expect(() => resolveConfig({ jobs: { workers: 4 } })).toThrow(/jobs/)
    expect(poolSizeFor('all', 64)).toBe(26)
    expect(poolSizeFor('worker', 256)).toBe(74)
    expect(poolSizeFor('api', 256)).toBe(10)
    const tuned = resolveConfig(
      { chains: { 'eip155:31337': { ...chain, blockPollMs: 100, maxInFlight: 500 } } },
      { TEST_SIGNER: '0x01' },
    )
    expect(tuned.chains['eip155:31337']).toMatchObject({ blockPollMs: 100, maxInFlight: 500 })
    expect(() =>
      resolveConfig({ chains: { 'eip155:31337': { ...chain, maxInFlight: 0 } } }, { TEST_SIGNER: '0x01' }),
    ).toThrow(/maxInFlight/)
    expect(
      resolveConfig({ chains: { 'eip155:31337': { ...chain, rpcBatchSize: 1 } } }, { TEST_SIGNER: '0x01' })
        .chains['eip155:31337'],
    ).toMatchObject({ rpcBatchSize: 1 })
    expect(() =>
      resolveConfig({ chains: { 'eip155:31337': { ...chain, rpcBatchSize: 0 } } }, { TEST_SIGNER: '0x01' }),
    ).toThrow(/rpcBatchSize/)
  })

  it('rate limit: burst defaults to twice the rate; false disables', () => {
    expect(resolveConfig({ rateLimit: { perSecond: 5 } }).rateLimit).toEqual({
      perSecond: 5,
      burst: 10,
      failedAuthPerMinute: 60,
    })
    expect(resolveConfig({ rateLimit: false }).rateLimit).toBe(false)
  })

  it('cors: gateway open and merchant API closed by default; origins checked and normalised', () => {
    expect(resolveConfig({}).cors).toEqual({ gateway: '*', merchant: [] })
    const cors = resolveConfig({
      cors: {
        gateway: ['HTTPS://Wallet.Example:443', 'http://127.0.0.1:5173'],
        merchant: ['http://a.example:80'],
      },
    }).cors
    expect(cors).toEqual({
      gateway: ['https://wallet.example', 'http://127.0.0.1:5173'],
      merchant: ['http://a.example'],
    })
    expect(() => resolveConfig({ cors: { gateway: ['https://wallet.example/'] } })).toThrow(/cors\.gateway/)
    expect(() => resolveConfig({ cors: { gateway: ['wallet.example'] } })).toThrow(/origin/)
    expect(() => resolveConfig({ cors: { merchant: '*' } })).toThrow(/cors\.merchant/)
    expect(() => resolveConfig({ cors: { wallet: [] } })).toThrow(/cors/)
  })

  it('loads a JSON file', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'caipay-config-'))
    const file = path.join(dir, 'caipay.config.json')
    await fs.writeFile(
      file,
      JSON.stringify({
        collectDataAtMinor: '100000',
        sanctioned: ['eip155:1:0x1111111111111111111111111111111111111111'],
      }),
    )
    const config = await loadConfig(file)
    expect(config.collectDataAtMinor).toBe('100000')
    expect(config.sanctioned).toHaveLength(1)
    await fs.writeFile(file, '{ not json')
    await expect(loadConfig(file)).rejects.toThrow(/Cannot read config file/)
    await fs.rm(dir, { recursive: true })
  })
})
