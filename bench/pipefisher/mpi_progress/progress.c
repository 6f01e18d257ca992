// Does a non-blocking send of N bytes complete while the sender computes?
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
static double spin(double s){double t=MPI_Wtime(),x=0;while(MPI_Wtime()-t<s)x+=1;return x;}
int main(int c,char**v){MPI_Init(&c,&v);int r;MPI_Comm_rank(MPI_COMM_WORLD,&r);
 for(int kb=1;kb<=1024;kb*=4){int n=kb*256;float*b=calloc(n,4);double lat=0;
  for(int it=0;it<5;it++){MPI_Barrier(MPI_COMM_WORLD);double t0=MPI_Wtime();
   if(r==0){MPI_Request q;MPI_Isend(b,n,MPI_FLOAT,1,0,MPI_COMM_WORLD,&q);spin(0.02);MPI_Wait(&q,MPI_STATUS_IGNORE);}
   else{MPI_Recv(b,n,MPI_FLOAT,0,0,MPI_COMM_WORLD,MPI_STATUS_IGNORE);lat+=MPI_Wtime()-t0;}}
  if(r==1)printf("%5d KiB: recv done after %.2f ms (sender computes 20 ms after Isend)\n",kb,lat/5*1e3);free(b);}
 MPI_Finalize();}
