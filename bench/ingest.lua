-- wrk script for bench/ingest.py: every request posts a distinct canonical run (new labels,
-- metrics drawn at random), so each is stored and analysed. Against the reference (bench/_echo_app.py) the same bodies are only decoded.
--   wrk -t1 -c16 -d10s -s bench/ingest.lua http://127.0.0.1:PORT/api/v1/runs
-- Distinct across wrk runs too: the labels carry the start time, the metrics a seeded draw, and
-- measured_at advances 0.1 ms per request from an hour before the start (a live stream, in order).
local start = os.time()
math.randomseed(start)
local counter = 0
local hardware = {"nvidia-a10g", "nvidia-l40s"}
local prompts = {256, 1024, 2048}
local template = [[{"deployment":"bench-%d","measured_at":"%s","labels":{"bench":"wrk","start":"%d","i":"%d"},]]
  .. [["setup":{"runtime":"vllm","hardware":"%s","model":"llama-3.1-8b","quantization":"bf16",]]
  .. [["engine_args":{"enable_prefix_caching":true,"max_num_batched_tokens":2048}},]]
  .. [["workload":{"num_requests":200,"concurrency":4,"prompt_tokens_mean":%d,"output_tokens_mean":256},]]
  .. [["metrics":{"ttft_ms":{"mean":%.3f,"p50":%.3f,"p90":%.3f,"p99":%.3f},]]
  .. [["itl_ms":{"mean":%.3f,"p50":%.3f,"p90":%.3f,"p99":%.3f},"decode_tok_s":%.3f,]]
  .. [["output_throughput_tok_s":%.3f,"queue_waiting_mean":0,"kv_cache_usage_mean":%.3f,"requests_completed":200}}]]

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"

request = function()
  counter = counter + 1
  local hw = hardware[counter % 2 + 1]
  local decode = hw == "nvidia-a10g" and 20 + math.random() * 14 or 30 + math.random() * 20
  local ttft = 80 + math.random() * 320
  local itl = 1000 / decode
  local at = start - 3600 + counter / 10000
  local measured = os.date("!%Y-%m-%dT%H:%M:%S", math.floor(at)) .. string.format(".%04dZ", counter % 10000)
  local body = string.format(template, counter % 10, measured, start, counter, hw, prompts[counter % 3 + 1],
    ttft, ttft * 0.9, ttft * 1.3, ttft * 1.8, itl, itl, itl * 1.2, itl * 1.6, decode, decode * 3.6,
    0.05 + math.random() * 0.55)
  return wrk.format(nil, nil, nil, body)
end

local errors = 0
response = function(status, headers, body)
  if status >= 300 then
    errors = errors + 1
    if errors <= 3 then io.stderr:write(status .. " " .. body:sub(1, 200) .. "\n") end
  end
end

done = function(summary, latency, requests)
  io.write(string.format("JSON {\"requests\": %d, \"seconds\": %.3f, \"non2xx\": %d, \"p99_ms\": %.2f}\n",
    summary.requests, summary.duration / 1e6, summary.errors.status, latency:percentile(99) / 1000))
end
