import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { Keypair } from '@solana/web3.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createSolanaChain } from './chain.js'

/**
 * A Solana JSON-RPC node on loopback answering getBlockHeight and getEpochInfo (single or batched), and
 * `/down` with a 503; it notes each request's transport (Node's fetch sends `sec-fetch-mode`, node:http
 * does not) and counts connections.
 */
let server: http.Server
let url: string
let connections = 0
const transports: string[] = []
beforeAll(async () => {
  server = http.createServer((request, response) => {
    let body = ''
    request.on('data', (chunk) => {
      body += chunk
    })
    request.on('end', () => {
      if (request.url === '/down') {
        response.writeHead(503)
        response.end()
        return
      }
      transports.push(request.headers['sec-fetch-mode'] ? 'fetch' : 'node:http')
      const answer = (call: { id: number; method: string }) => ({
        jsonrpc: '2.0',
        id: call.id,
        result:
          call.method === 'getEpochInfo'
            ? { absoluteSlot: 90, blockHeight: 80, epoch: 0, slotIndex: 90, slotsInEpoch: 432_000 }
            : call.method === 'getSignatureStatuses'
              ? { context: { slot: 90 }, value: [null] }
              : 77,
      })
      const parsed = JSON.parse(body)
      response.writeHead(200, { 'content-type': 'application/json' })
      response.end(JSON.stringify(Array.isArray(parsed) ? parsed.map(answer) : answer(parsed)))
    })
  })
  server.on('connection', () => connections++)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve))
})

function chainOf(rpcUrls: string[], keepAlive: boolean) {
  return createSolanaChain({
    caip2: 'solana:test',
    rpcUrls,
    service: Keypair.generate(),
    assets: [],
    keepAlive,
  })
}

describe('a Solana chain asks its nodes over kept-alive node:http connections (FastPath) or through fetch', () => {
  for (const keepAlive of [true, false]) {
    it(`keepAlive ${keepAlive}: the same answers, the Connection's calls and the batch both through ${keepAlive ? 'node:http on one connection' : 'fetch'}`, async () => {
      transports.length = 0
      const before = connections
      const chain = chainOf([url], keepAlive)
      const heights: number[] = []
      for (let i = 0; i < 5; i++) heights.push(await chain.connection.getBlockHeight())
      expect(heights).toEqual([77, 77, 77, 77, 77])
      const proof = await chain.proveUnlanded([
        '1111111111111111111111111111111111111111111111111111111111111111',
      ])
      expect(proof).toEqual({ finalizedHeight: 80, statuses: [null] })
      expect(transports).toEqual(Array(6).fill(keepAlive ? 'node:http' : 'fetch'))
      if (keepAlive) expect(connections - before).toBe(1)
    })

    it(`keepAlive ${keepAlive}: a node answering 503 is skipped for the next`, async () => {
      transports.length = 0
      const chain = chainOf([`${url}/down`, url], keepAlive)
      expect(await chain.connection.getBlockHeight()).toBe(77)
      expect(transports).toEqual([keepAlive ? 'node:http' : 'fetch'])
    })
  }
})
