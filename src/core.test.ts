import { describe, expect, it } from 'vitest'
import { measureBundle } from '../bench/bundle.js'

// The wallet core must run in browsers and React Native: no Node built-ins, no chain SDKs, no server code.
describe('wallet core bundle', () => {
  it('pulls in only its own sources, zod and eventemitter3', async () => {
    const report = await measureBundle('src/index.ts')
    const foreign = report.inputs.filter(
      (input) =>
        !input.startsWith('src/') &&
        !input.startsWith('node_modules/zod/') &&
        !input.startsWith('node_modules/eventemitter3/'),
    )
    expect(foreign).toEqual([])
    expect(report.inputs.filter((input) => input.startsWith('src/server/'))).toEqual([])
    expect(report.externals).toEqual([])
  })
})
