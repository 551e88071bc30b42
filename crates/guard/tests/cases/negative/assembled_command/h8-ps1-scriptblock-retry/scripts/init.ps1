param([string]$Dir = 'infra/dev')
$ErrorActionPreference = 'Stop'
Set-Alias -Name tf -Value terraform

$retry = {
  param([scriptblock]$Action, [int]$Times = 3)
  for ($i = 1; $i -le $Times; $i++) {
    try {
      return & $Action
    } catch {
      Write-Warning "attempt $i failed: $_"
      Start-Sleep -Seconds (2 * $i)
    }
  }
  throw "gave up after $Times attempts"
}

$log = { param($Text) Write-Host "[tf-init] $Text" }

Push-Location $Dir
try {
  & $log "initialising $Dir"
  & $retry { tf init -input=false -no-color }
  $providers = & $retry { tf providers -no-color }
  & $log ($providers | Out-String)
  $log.Invoke('done')
} finally {
  Pop-Location
}
