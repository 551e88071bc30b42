[CmdletBinding()]
param([Parameter(Mandatory)][string]$Repo)

function Invoke-GitHub {
    param([string]$Uri, [hashtable]$Headers)
    $answer = Invoke-RestMethod -Uri $Uri -Headers $Headers -Method Get
    Write-Verbose "GET $Uri"
    $answer
}

$headers = @{ 'Accept' = 'application/vnd.github+json' }
if ($env:GITHUB_TOKEN) { $headers['Authorization'] = "Bearer $env:GITHUB_TOKEN" }

$query = @{
    Uri     = "https://api.github.com/repos/$Repo/issues?state=open&per_page=50"
    Headers = $headers
}
$issues = Invoke-GitHub @query

$build = @{ FilePath = 'git'; ArgumentList = @('rev-parse', '--short', 'HEAD'); NoNewWindow = $true; Wait = $true }
Start-Process @build

$issues | ForEach-Object {
    [pscustomobject]@{ Number = $_.number; Title = $_.title; Author = $_.user.login }
} | Format-Table -AutoSize
