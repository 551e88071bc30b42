[CmdletBinding()]
param([Parameter(Mandatory)][string]$Repo)

function Get-Resource {
    param(
        [string]$Uri,
        [hashtable]$Headers = @{},
        [switch]$Raw
    )
    $r = Invoke-WebRequest -Uri $Uri -Headers $Headers -UseBasicParsing
    if ($Raw) { return $r.Content }
    return ($r.Content | ConvertFrom-Json)
}

$headers = @{ 'Accept' = 'application/vnd.github+json' }
if ($env:GITHUB_TOKEN) { $headers['Authorization'] = "Bearer $env:GITHUB_TOKEN" }

$query = @{
    Uri     = "https://api.github.com/repos/$Repo/issues?state=open&per_page=50"
    Headers = $headers
}
$issues = Get-Resource @query

$build = @{ FilePath = 'git'; ArgumentList = @('rev-parse', '--short', 'HEAD'); NoNewWindow = $true; Wait = $true }
Start-Process @build

$issues | ForEach-Object {
    [pscustomobject]@{ Number = $_.number; Title = $_.title; Author = $_.user.login }
} | Format-Table -AutoSize
