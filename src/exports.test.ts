import { describe, expect, it } from 'vitest'

// An accidental change to a public entry point fails here; update the list on purpose.
describe('public exports', () => {
  it('caipay', async () => {
    expect(Object.keys(await import('./index.js')).sort()).toMatchSnapshot()
  })
  it('caipay/client', async () => {
    expect(Object.keys(await import('./client/index.js')).sort()).toMatchSnapshot()
  })
  it('caipay/review', async () => {
    expect(Object.keys(await import('./review/index.js')).sort()).toMatchSnapshot()
  })
  it('caipay/x402', async () => {
    expect(Object.keys(await import('./x402/index.js')).sort()).toMatchSnapshot()
  })
})
