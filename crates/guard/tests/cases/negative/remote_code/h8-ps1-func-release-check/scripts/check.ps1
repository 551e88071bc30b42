$ErrorActionPreference = 'Stop'

function Get-LatestRelease {
  param(
    [Parameter(Mandatory)] [string]$Repo
  )
  $headers = @{ 'Accept' = 'application/vnd.github+json'; 'User-Agent' = 'gh-release-check' }
  Invoke-RestMethod -Uri "https://api.github.com/repos/$Repo/releases/latest" -Headers $headers
}

function Get-InstalledVersion {
  $line = gh --version | Select-Object -First 1
  if ($line -match 'gh version ([0-9.]+)') {
    return $Matches[1]
  }
  return $null
}

function Compare-SemVer($A, $B) {
  return ([version]$A).CompareTo([version]$B)
}

$release = Get-LatestRelease -Repo 'cli/cli'
$latest = $release.tag_name.TrimStart('v')
$installed = Get-InstalledVersion

if (-not $installed) {
  Write-Output 'gh is not installed: winget install --id GitHub.cli'
} elseif ((Compare-SemVer $installed $latest) -lt 0) {
  Write-Output "gh $installed is older than $latest: winget upgrade --id GitHub.cli"
} else {
  Write-Output "gh $installed is the latest release"
}
