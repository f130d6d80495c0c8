-- wrk script for bench/load.py: a mixed load, 80% reads (run listings, one run, deployments) and
-- 20% writes of distinct canonical runs (each stored and analysed).
--   wrk -t2 -c16 -d60s -s bench/load.lua http://127.0.0.1:PORT
-- Reports, per thread summed by wrk's done(): requests, non-2xx answers, p99, and the writes
-- acknowledged (201), which bench/load.py compares with the runs stored afterwards.
local threads = {}
setup = function(thread)
  thread:set("id", #threads + 1)
  table.insert(threads, thread)
end

local counter = 0
acked = 0  -- a global: done() reads it from each thread with thread:get
local errors = 0
local start = os.time()
local hardware = {"nvidia-a10g", "nvidia-l40s"}
local template = [[{"deployment":"load-%d","measured_at":"%s","labels":{"bench":"load","start":"%d","t":"%d","i":"%d"},]]
  .. [["setup":{"runtime":"vllm","hardware":"%s","model":"llama-3.1-8b","quantization":"bf16"},]]
  .. [["workload":{"num_requests":200,"concurrency":4,"prompt_tokens_mean":1024,"output_tokens_mean":256},]]
  .. [["metrics":{"ttft_ms":{"mean":%.3f,"p50":%.3f,"p99":%.3f},"itl_ms":{"mean":%.3f,"p50":%.3f,"p99":%.3f},]]
  .. [["decode_tok_s":%.3f,"requests_completed":200}}]]
local reads = {"/api/v1/runs?limit=20", "/api/v1/deployments", "/api/v1/runs?limit=5&deployment=load-1", "/health/live"}

init = function(args)
  math.randomseed(os.time() + id)
end

request = function()
  counter = counter + 1
  if counter % 5 ~= 0 then
    return wrk.format("GET", reads[counter % #reads + 1])
  end
  local hw = hardware[counter % 2 + 1]
  local decode = 20 + math.random() * 30
  local ttft = 80 + math.random() * 320
  local itl = 1000 / decode
  local at = start - 3600 + (counter + id * 1000000) / 100000
  local measured = os.date("!%Y-%m-%dT%H:%M:%S", math.floor(at)) .. string.format(".%05dZ", (counter + id) % 100000)
  local body = string.format(template, counter % 10, measured, start, id, counter, hw,
    ttft, ttft * 0.9, ttft * 1.8, itl, itl, itl * 1.6, decode)
  return wrk.format("POST", "/api/v1/runs", {["Content-Type"] = "application/json"}, body)
end

response = function(status, headers, body)
  if status == 201 then
    acked = acked + 1
  elseif status >= 300 then
    errors = errors + 1
    if errors <= 3 then io.stderr:write(status .. " " .. body:sub(1, 200) .. "\n") end
  end
end

done = function(summary, latency, requests)
  local total_acked = 0
  for _, thread in ipairs(threads) do
    total_acked = total_acked + thread:get("acked")
  end
  io.write(string.format("JSON {\"requests\": %d, \"seconds\": %.3f, \"non2xx\": %d, \"p99_ms\": %.2f, \"p50_ms\": %.2f, \"acked\": %d}\n",
    summary.requests, summary.duration / 1e6, summary.errors.status, latency:percentile(99) / 1000,
    latency:percentile(50) / 1000, total_acked))
end
