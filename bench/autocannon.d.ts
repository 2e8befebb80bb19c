// The part of autocannon 9's programmatic API the benchmark uses (the package ships no types).
declare module 'autocannon' {
  namespace autocannon {
    interface Request {
      method?: string
      path?: string
      headers?: Record<string, string>
      body?: string
      setupRequest?: (request: Request, context: Record<string, unknown>) => Request | undefined
    }
    interface Options {
      url: string
      connections?: number
      duration?: number
      amount?: number
      pipelining?: number
      overallRate?: number
      requests?: Request[]
    }
    interface Histogram {
      average: number
      mean: number
      stddev: number
      min: number
      max: number
      total: number
      p50: number
      p90: number
      p97_5: number
      p99: number
    }
    interface Result {
      duration: number
      requests: Histogram
      latency: Histogram
      throughput: Histogram
      errors: number
      timeouts: number
      non2xx: number
      '2xx': number
    }
  }
  function autocannon(options: autocannon.Options): Promise<autocannon.Result>
  export default autocannon
}
